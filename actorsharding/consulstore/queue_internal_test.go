package consulstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding/delivery/queuetest"
	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/messages"
)

// testCluster is the cluster name of the tests' queues.
const testCluster = "app"

// A Consul that takes the request and never answers cannot hold Close
// (and so a controller's Stop) beyond its bound; the claim is given up.
func TestDurableProducerQueueCloseIsBounded(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hung.Close()
	defer close(release) // so that the server closes, should Close hang
	client, err := api.NewClient(&api.Config{Address: hung.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	q := newDurableProducerQueue(client, testCluster, "bounded", "p1")
	if q.closeTimeout != queueCloseTimeout {
		t.Fatalf("close timeout %v, want %v", q.closeTimeout, queueCloseTimeout)
	}
	q.closeTimeout = 200 * time.Millisecond
	q.ownerIndex = 42 // as a LoadState leaves it
	done := make(chan error, 1)
	go func() { done <- q.Close() }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close against a hung Consul: %v, want a deadline error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close against a hung Consul did not return")
	}
	if q.ownerIndex != 0 {
		t.Fatalf("claim index %d after Close, want 0", q.ownerIndex)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A StoreMessageSent split over transactions may be cut after any of
// them. Wherever it is cut, a numbering that the batch replaces is loaded
// whole, old or new: never the old one without its messages.
func TestDurableProducerQueueSentCutShortLeavesNumberingsWhole(t *testing.T) {
	ctx := context.Background()
	client := consulagent.Start(t).Client()
	old := []*messages.MessageSent{queuetest.Sent("e", 7, 1, "1"), queuetest.Sent("e", 7, 2, "2"), queuetest.Sent("e", 7, 3, "3")}
	batch := []*messages.MessageSent{queuetest.Sent("e", 8, 1, "new 1"), queuetest.Sent("e", 8, 2, "new 2"), queuetest.Sent("f", 9, 1, "f1")}
	for cut := 0; ; cut++ {
		producer := fmt.Sprintf("p%d", cut)
		q := newDurableProducerQueue(client, testCluster, "cut", producer)
		if _, err := q.LoadState(ctx); err != nil {
			t.Fatal(err)
		}
		if err := q.StoreMessageSent(ctx, old); err != nil {
			t.Fatal(err)
		}
		if err := q.StoreMessageConfirmed(ctx, []*messages.Confirmed{queuetest.Confirmed("e", 7, 1)}); err != nil {
			t.Fatal(err)
		}
		_, ops, err := q.planSent(q.content, batch)
		if err != nil {
			t.Fatal(err)
		}
		if cut > len(ops) {
			break
		}
		if ok, resp, _, err := client.Txn().Txn(ops[:cut], nil); err != nil || !ok {
			t.Fatalf("writing the first %d operations: %v, %v", cut, err, resp)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := newDurableProducerQueue(client, testCluster, "cut", producer).LoadState(ctx)
		if err != nil {
			t.Fatalf("cut after %d of %d operations: %v", cut, len(ops), err)
		}
		var e []string
		for _, m := range st.GetUnconfirmed() {
			if m.GetEntityId() == "e" {
				e = append(e, fmt.Sprintf("%d/%d", m.GetProducerIncarnation(), m.GetSeqNr()))
			}
		}
		inc := st.GetEntities()[0].GetProducerIncarnation()
		switch got := fmt.Sprint(e); {
		case inc == 7 && got == "[7/2 7/3]":
		case inc == 8 && (got == "[]" || got == "[8/1]" || got == "[8/1 8/2]"):
		default:
			t.Fatalf("cut after %d of %d operations: entity e of incarnation %d holds %s", cut, len(ops), inc, got)
		}
	}
}
