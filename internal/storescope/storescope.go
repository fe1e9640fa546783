// Package storescope checks that a store made for one cluster and one
// entity type (actorsharding/consulstore's, whose keys carry both names)
// is used by that cluster and type: a store of another cluster's name
// would share its keys with that cluster.
package storescope

import (
	"errors"
	"fmt"
)

// ErrMismatch: the store was made for another cluster or entity type.
var ErrMismatch = errors.New("the store was made for another cluster or entity type")

// Scoped is a store that keeps the data of one entity type of one cluster.
type Scoped interface {
	ClusterName() string
	TypeName() string
}

// Check returns an error wrapping ErrMismatch when store is Scoped and
// was made for another cluster or entity type than clusterName and
// typeName, and nil otherwise (stores without names, such as the memory
// stores, serve whoever holds them). what names the store in the error.
func Check(what string, store any, clusterName, typeName string) error {
	s, ok := store.(Scoped)
	if !ok || (s.ClusterName() == clusterName && s.TypeName() == typeName) {
		return nil
	}
	return fmt.Errorf("%w: the %s is cluster %q's, entity type %q's; this is cluster %q, entity type %q (make it with the cluster's Name())",
		ErrMismatch, what, s.ClusterName(), s.TypeName(), clusterName, typeName)
}
