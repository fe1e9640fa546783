package shard

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// EntityName returns the child actor name of the entity with the given ID.
//
// The name is url.PathEscape(id) with '$' also escaped, as "%24":
//   - '/' separates the parent from the child in proto.actor PIDs, so it must
//     not appear inside a name (PathEscape escapes it, "%2F");
//   - '$' starts the names proto.actor generates for unnamed actors
//     ("$123"), so an entity named like that could collide with one;
//   - '%' itself is escaped ("%25"), so the escaping is reversible and two
//     IDs never share a name; spaces, control characters, non-ASCII (and
//     invalid UTF-8) bytes are escaped byte by byte.
//
// ASCII letters, digits and "-._~&+:=@" are kept as they are, so ordinary
// IDs keep readable names. EntityID is the reverse. The empty ID is not a
// valid entity ID; its name is "", which no child can have.
func EntityName(entityID string) string {
	return strings.ReplaceAll(url.PathEscape(entityID), "$", "%24")
}

// EntityID returns the entity ID whose child name (see EntityName) is name.
// It fails on a name EntityName never returns: empty, with a bad escape, or
// not in canonical form (e.g. "%41" for "A", or a raw '$').
func EntityID(name string) (string, error) {
	if name == "" {
		return "", errors.New("shard: empty entity name")
	}
	id, err := url.PathUnescape(name)
	if err != nil {
		return "", fmt.Errorf("shard: entity name %q: %w", name, err)
	}
	// Only the canonical form is accepted, so that one ID has exactly one
	// name and a name found in a PID maps back to the entity that owns it.
	if EntityName(id) != name {
		return "", fmt.Errorf("shard: %q is not an entity name (the name of ID %q is %q)", name, id, EntityName(id))
	}
	return id, nil
}
