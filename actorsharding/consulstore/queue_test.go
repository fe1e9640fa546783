package consulstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/actorsharding/delivery/queuetest"
	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/messages"
)

func TestDurableProducerQueueContract(t *testing.T) {
	client := consulagent.Start(t).Client()
	queuetest.Run(t, queuetest.Harness{Open: func(t *testing.T, name string) (delivery.DurableProducerQueue, error) {
		return consulstore.NewDurableProducerQueue(client, testCluster, "queue/contract", name), nil
	}})
}

func TestDurableProducerQueuePrefix(t *testing.T) {
	if got, want := consulstore.DurableProducerQueuePrefix(testCluster, "a/b", ".p/1"), "protoshard/app/delivery/a/b/%2Ep%2F1/"; got != want {
		t.Fatalf("prefix = %q, want %q", got, want)
	}
	q, ok := consulstore.NewDurableProducerQueue(nil, "app-a", "Counter", "p").(interface {
		ClusterName() string
		TypeName() string
	})
	if !ok {
		t.Fatal("the queue does not say its cluster and entity type (ClusterName, TypeName)")
	}
	if q.ClusterName() != "app-a" || q.TypeName() != "Counter" {
		t.Fatalf("queue of cluster %q, type %q", q.ClusterName(), q.TypeName())
	}
}

// A queue without a cluster name would share its keys with every unnamed
// cluster's: it loads nothing and claims nothing.
func TestDurableProducerQueueRefusesEmptyClusterName(t *testing.T) {
	client := consulagent.Start(t).Client()
	if _, err := consulstore.NewDurableProducerQueue(client, "", "Counter", "p").LoadState(context.Background()); err == nil {
		t.Fatal("LoadState without a cluster name succeeded")
	}
	if keys, _, err := client.KV().Keys("protoshard/", "", nil); err != nil || len(keys) != 0 {
		t.Fatalf("keys written: %q, %v", keys, err)
	}
}

// Whoever writes the owner key takes the claim: the holder's every write
// fails with ErrQueueFenced and changes nothing.
func TestDurableProducerQueueOwnerFencing(t *testing.T) {
	ctx := context.Background()
	client := consulagent.Start(t).Client()
	q := consulstore.NewDurableProducerQueue(client, testCluster, "fencing", "p1")
	if _, err := q.LoadState(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.StoreMessageSent(ctx, []*messages.MessageSent{queuetest.Sent("e", 1, 1, "one")}); err != nil {
		t.Fatal(err)
	}
	owner := consulstore.DurableProducerQueuePrefix(testCluster, "fencing", "p1") + "owner"
	if _, err := client.KV().Put(&api.KVPair{Key: owner, Value: []byte("someone else")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.StoreMessageSent(ctx, []*messages.MessageSent{queuetest.Sent("e", 1, 2, "two")}); !errors.Is(err, delivery.ErrQueueFenced) {
		t.Fatalf("StoreMessageSent after the owner changed: %v, want ErrQueueFenced", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if p, _, err := client.KV().Get(owner, nil); err != nil || p == nil || string(p.Value) != "someone else" {
		t.Fatalf("the fenced holder's Close touched the new owner: %v, %v", p, err)
	}
	q2 := consulstore.NewDurableProducerQueue(client, testCluster, "fencing", "p1")
	st, err := q2.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetUnconfirmed()) != 1 || st.GetUnconfirmed()[0].GetSeqNr() != 1 {
		t.Fatalf("loaded %v, want e/1 only", st)
	}
}

// Writes of more operations than one transaction takes are split, and
// confirmations delete the keys of what they confirm.
func TestDurableProducerQueueSplitsLargeWrites(t *testing.T) {
	ctx := context.Background()
	client := consulagent.Start(t).Client()
	q := consulstore.NewDurableProducerQueue(client, testCluster, "split", "p1")
	if _, err := q.LoadState(ctx); err != nil {
		t.Fatal(err)
	}
	var batch []*messages.MessageSent
	for e := range 3 {
		for seq := int64(1); seq <= 60; seq++ {
			batch = append(batch, queuetest.Sent(fmt.Sprintf("e%d", e), 9, seq, fmt.Sprint(seq)))
		}
	}
	if err := q.StoreMessageSent(ctx, batch); err != nil {
		t.Fatal(err)
	}
	prefix := consulstore.DurableProducerQueuePrefix(testCluster, "split", "p1")
	keys, _, err := client.KV().Keys(prefix, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1+3+180 {
		t.Fatalf("%d keys, want owner, 3 metas and 180 messages", len(keys))
	}
	if err := q.StoreMessageConfirmed(ctx, []*messages.Confirmed{queuetest.Confirmed("e0", 9, 60), queuetest.Confirmed("e1", 9, 59)}); err != nil {
		t.Fatal(err)
	}
	keys, _, _ = client.KV().Keys(prefix, "", nil)
	if len(keys) != 1+3+61 {
		t.Fatalf("%d keys after confirming 119, want 65", len(keys))
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q2 := consulstore.NewDurableProducerQueue(client, testCluster, "split", "p1")
	st, err := q2.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GetEntities()) != 3 || len(st.GetUnconfirmed()) != 61 || st.GetEntities()[0].GetConfirmedSeqNr() != 60 {
		t.Fatalf("loaded %d entities, %d unconfirmed, e0 confirmed %d", len(st.GetEntities()), len(st.GetUnconfirmed()), st.GetEntities()[0].GetConfirmedSeqNr())
	}
}
