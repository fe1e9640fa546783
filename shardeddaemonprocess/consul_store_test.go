package shardeddaemonprocess

import (
	"context"
	"errors"
	"testing"

	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/testkit/consulagent"
)

func TestConsulStore(t *testing.T) {
	client := consulagent.Start(t).Client()
	testStore(t, NewConsulStore(client, "blue", "workers"))

	// Another cluster on the same Consul starts from nothing.
	if _, ok, err := NewConsulStore(client, "green", "workers").Load(context.Background()); ok || err != nil {
		t.Fatalf("another cluster's store: %v, %v; want nothing stored", ok, err)
	}
	if got, want := StoreKey("blue", "workers"), "protoshard/blue/sharded-daemon-process/workers/processes"; got != want {
		t.Fatalf("StoreKey = %q, want %q", got, want)
	}
	if err := NewConsulStore(client, "", "workers").Save(context.Background(), initialProcesses(1, t0)); !errors.Is(err, consulkey.ErrNoClusterName) {
		t.Fatalf("Save without a cluster name: %v, want ErrNoClusterName", err)
	}
}
