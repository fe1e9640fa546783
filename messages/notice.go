package messages

// The hand-off protocol's messages are notices (internal/guard.Notice):
// the rebalance worker that sends or awaits them ends on its time-out or
// on the region's Terminated when one is lost, so one that reaches an
// actor that has stopped (a region stopping with its last shard as the
// whole cluster shuts down, a worker that has just finished) is no drop.

// Notice marks BeginHandOff as a notice.
func (*BeginHandOff) Notice() {}

// Notice marks BeginHandOffAck as a notice.
func (*BeginHandOffAck) Notice() {}

// Notice marks HandOff as a notice.
func (*HandOff) Notice() {}

// Notice marks ShardStopped as a notice.
func (*ShardStopped) Notice() {}
