package membership

import "time"

// SetClock makes c, and its quarantine, read the time from now.
func SetClock(c *Cluster, now func() time.Time) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
	if q := c.cfg.Quarantine; q != nil {
		q.mu.Lock()
		q.now = now
		q.mu.Unlock()
	}
}

// RemovedCount is the number of removed members c remembers.
func RemovedCount(c *Cluster) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removed.Len()
}

// RemovedRetention is how long c remembers a removed member at least.
func RemovedRetention(c *Cluster) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removed.Retention()
}

// QuarantineSizes counts the actor systems and addresses q blocks.
func QuarantineSizes(q *Quarantine) (systems, addresses int) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.systems.Len(), q.addresses.Len()
}

// QuarantineRetention is how long q blocks what nothing lifts at least.
func QuarantineRetention(q *Quarantine) time.Duration {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.systems.Retention()
}

// Diff is diff, for the package's external tests.
var Diff = diff

// SystemBlocked reports whether q refuses messages from the actor system id.
func SystemBlocked(q *Quarantine, id string) bool { return q.systemBlocked(id) }

// AddressBlocked reports whether q refuses to dial address.
func AddressBlocked(q *Quarantine, address string) bool { return q.addressBlocked(address) }
