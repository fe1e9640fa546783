// Package storetest holds the contract test of shardeddaemonprocess.Store:
// every implementation runs it (MemoryStore in package
// shardeddaemonprocess, the Consul store in its consulstore).
package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/protoshard/protoshard/shardeddaemonprocess"
)

// Run checks the Store contract on store, which must be empty.
func Run(t *testing.T, store shardeddaemonprocess.Store) {
	t.Helper()
	ctx := context.Background()
	if _, ok, err := store.Load(ctx); ok || err != nil {
		t.Fatalf("empty store Load: %v, %v", ok, err)
	}
	type P = shardeddaemonprocess.Processes
	steps := []struct {
		p  P
		ok bool
	}{
		{P{Revision: 1, Count: 3, Completed: true, StartedUnixMilli: 1000}, true},
		{P{Revision: 1, Count: 3, Completed: true, StartedUnixMilli: 1000}, true}, // again: a coordinator that saved and moved
		{P{Revision: 2, Count: 5, PreviousCount: 3, StartedUnixMilli: 2000}, true},
		{P{Revision: 1, Count: 4, Completed: true}, false}, // an older revision
		{P{Revision: 2, Count: 5, PreviousCount: 3, StartedUnixMilli: 2000}, true},
		{P{Revision: 2, Count: 5, Completed: true, StartedUnixMilli: 2000}, true},
		{P{Revision: 2, Count: 5, PreviousCount: 3}, false}, // reopening a completed change
		{P{Revision: 2, Count: 6, Completed: true}, false},  // another count, same revision
		{P{Revision: 3, Count: 1, PreviousCount: 5}, true},
	}
	var want P
	for i, st := range steps {
		err := store.Save(ctx, st.p)
		switch {
		case st.ok && err != nil:
			t.Fatalf("step %d: Save(%+v): %v", i, st.p, err)
		case !st.ok && !errors.Is(err, shardeddaemonprocess.ErrStaleRevision):
			t.Fatalf("step %d: Save(%+v) = %v, want ErrStaleRevision", i, st.p, err)
		case st.ok:
			want = st.p
		}
		got, ok, err := store.Load(ctx)
		if err != nil || !ok || got != want {
			t.Fatalf("step %d: Load = %+v, %v, %v; want %+v", i, got, ok, err, want)
		}
	}
}
