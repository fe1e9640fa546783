package consulstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/shardeddaemonprocess"
	"github.com/protoshard/protoshard/shardeddaemonprocess/consulstore"
	"github.com/protoshard/protoshard/shardeddaemonprocess/storetest"
)

func TestStore(t *testing.T) {
	client := consulagent.Start(t).Client()
	storetest.Run(t, consulstore.NewStore(client, "blue", "workers"))

	// Another cluster on the same Consul starts from nothing.
	if _, ok, err := consulstore.NewStore(client, "green", "workers").Load(context.Background()); ok || err != nil {
		t.Fatalf("another cluster's store: %v, %v; want nothing stored", ok, err)
	}
	if got, want := consulstore.Key("blue", "workers"), "protoshard/blue/sharded-daemon-process/workers/processes"; got != want {
		t.Fatalf("Key = %q, want %q", got, want)
	}
	p := shardeddaemonprocess.Processes{Revision: 1, Count: 1, Completed: true}
	if err := consulstore.NewStore(client, "", "workers").Save(context.Background(), p); !errors.Is(err, consulkey.ErrNoClusterName) {
		t.Fatalf("Save without a cluster name: %v, want ErrNoClusterName", err)
	}
}
