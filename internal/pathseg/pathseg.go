// Package pathseg turns any string into one path segment: a Consul KV key
// segment or a file name.
package pathseg

import (
	"net/url"
	"strings"
)

// Escape makes s one path segment that survives an HTTP round trip and a
// file system unchanged: url.PathEscape escapes '/', '%', '?', spaces and
// non-ASCII bytes, and a leading '.' is escaped too so that "." and ".."
// never appear as segments (HTTP path cleaning would resolve them) and no
// name is a hidden file. Distinct strings give distinct segments.
func Escape(s string) string {
	e := url.PathEscape(s)
	if strings.HasPrefix(e, ".") {
		e = "%2E" + e[1:]
	}
	return e
}
