package guard

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/messages"
)

// The hand-off protocol's messages, lost at a stopped receiver, lose
// nothing: the rebalance worker ends on its time-out or the region's
// Terminated. Anything else reaching a stopped actor is a drop.
func TestIsNotice(t *testing.T) {
	for _, tc := range []struct {
		msg  any
		want bool
	}{
		{&messages.BeginHandOff{}, true},
		{&messages.BeginHandOffAck{}, true},
		{&messages.HandOff{}, true},
		{&messages.ShardStopped{}, true},
		{&actor.DeadLetterResponse{}, true},
		{&messages.StartEntity{}, false},
		{&messages.ShardHome{}, false},
		{"user message", false},
	} {
		if got := isNotice(tc.msg); got != tc.want {
			t.Errorf("isNotice(%T) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
