package consulstore

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

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
	q := NewDurableProducerQueue(client, "bounded", "p1")
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
