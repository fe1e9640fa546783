package coordinator

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// stRegion is the region PID on the i-th test node.
func stRegion(i int) *actor.PID { return actor.NewPID(fmt.Sprintf("127.0.0.%d:1", i), "region") }

// stProxy is the proxy PID on the i-th test node.
func stProxy(i int) *actor.PID { return actor.NewPID(fmt.Sprintf("127.0.0.%d:1", i), "proxy") }

// stBuild applies events to NewState(remember) and fails the test on any
// error.
func stBuild(t *testing.T, remember bool, events ...Event) State {
	t.Helper()
	s := NewState(remember)
	for _, e := range events {
		if err := s.Apply(e); err != nil {
			t.Fatalf("building state: %v", err)
		}
	}
	return s
}

// stAssertEqual compares states, treating nil and empty shard lists alike.
func stAssertEqual(t *testing.T, got, want State) {
	t.Helper()
	assertStateEqual(t, want, got)
}

// stAssertConsistent checks that s survives its wire form unchanged:
// EncodeState validates it and DecodeState rebuilds Shards from the
// regions' lists, so an allocated shard outside exactly its region's list,
// or one both allocated and unallocated, fails.
func stAssertConsistent(t *testing.T, s State) {
	t.Helper()
	data, err := EncodeState(s)
	if err != nil {
		t.Fatalf("state is inconsistent: %v", err)
	}
	back, err := DecodeState(data)
	if err != nil {
		t.Fatalf("state does not decode: %v", err)
	}
	assertStateEqual(t, s, back)
}
