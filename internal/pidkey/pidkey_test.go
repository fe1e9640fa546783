package pidkey

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

func TestOf(t *testing.T) {
	a := actor.NewPID("127.0.0.1:1", "sharding/T")
	copyOfA := &actor.PID{Address: a.Address, Id: a.Id, RequestId: 7}
	if Of(a) != Of(copyOfA) {
		t.Fatalf("copies differ: %q, %q", Of(a), Of(copyOfA))
	}
	if Of(a) == Of(actor.NewPID("127.0.0.1:2", "sharding/T")) || Of(a) == Of(actor.NewPID("127.0.0.1:1", "sharding/U")) {
		t.Fatal("different PIDs share a key")
	}
	if Of(nil) != "" {
		t.Fatal("nil")
	}
}
