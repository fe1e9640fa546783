package consul

import "github.com/protoshard/protoshard/lease"

// LeaseKey returns the Consul KV key of the lock of l, a lease of this
// package.
func LeaseKey(l lease.Lease) string { return l.(*consulLease).key }
