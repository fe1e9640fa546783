// Package handoff holds the default of Akka's handoff-timeout, which the
// coordinator, its rebalance workers and the shards each apply: one value,
// so that their defaults cannot drift apart.
package handoff

import "time"

// Timeout is Akka's handoff-timeout (akka.cluster.sharding.handoff-timeout,
// 60 s): how long a rebalance waits for the regions' acknowledgements and
// for the shard to stop its entities before it gives up.
const Timeout = 60 * time.Second
