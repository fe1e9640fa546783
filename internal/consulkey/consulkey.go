// Package consulkey lays out protoshard's keys in Consul KV. Everything a
// cluster keeps there lives under Prefix(its name), so that clusters that
// share one Consul never share a key:
//
//	protoshard/<cluster>/sharding/<type>/coordinator-state
//	protoshard/<cluster>/sharding/<type>/entities/<shard>/<bucket>
//	protoshard/<cluster>/delivery/<type>/<producer>/...
//	protoshard/<cluster>/sharded-daemon-process/<name>/processes
//	protoshard/<cluster>/durable-state/<type>/<entity>
//	protoshard/<cluster>/lease/<lease name>
//	protoshard/<cluster>/membership/leaving/<member id>
//
// <cluster> is the cluster's name (membership.Cluster.Name) escaped as
// one path segment (internal/pathseg). The layout is a stored format: the
// stores, the Consul membership and leases, and the CLI all derive their
// keys from Prefix.
package consulkey

import (
	"errors"

	"github.com/protoshard/protoshard/internal/pathseg"
)

// ErrNoClusterName: keys were asked for without a cluster name. An empty
// name would put every such cluster's keys under one prefix.
var ErrNoClusterName = errors.New("empty cluster name (pass membership.Cluster.Name())")

// Prefix returns the prefix, ending in '/', of every key of the cluster
// clusterName. An empty name gives "protoshard//", which no writer uses:
// CheckClusterName refuses it first.
func Prefix(clusterName string) string {
	return "protoshard/" + pathseg.Escape(clusterName) + "/"
}

// LeasePrefix returns the prefix, ending in '/', of the cluster's lease
// keys. Both Consul leases (lease/consul's sessions and lease/consulcas's
// records) keep a lease at LeasePrefix + its name, so that each refuses a
// key the other kind holds.
func LeasePrefix(clusterName string) string {
	return Prefix(clusterName) + "lease/"
}

// CheckClusterName returns ErrNoClusterName for an empty name: a Consul
// request path with an empty segment is cleaned into another key.
func CheckClusterName(clusterName string) error {
	if clusterName == "" {
		return ErrNoClusterName
	}
	return nil
}
