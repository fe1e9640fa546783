package readme

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/examples/sharding/counterpb"
	"github.com/protoshard/protoshard/internal/consulagent"
)

// TestConsulNodeSnippet runs the cross-process snippet of docs/sharding.md against a
// real Consul: a node joins, counts, and leaves; a second node sends
// through a proxy.
func TestConsulNodeSnippet(t *testing.T) {
	ctx, system := newNode(t, 2*time.Minute)
	agent := consulagent.Start(t)
	t.Setenv("CONSUL_HTTP_ADDR", agent.Addr())
	sharding, store, err := consulNode(ctx, system, "127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sharding.Leave(ctx)
	count, err := countTwice(ctx, sharding, store)
	if err != nil {
		t.Fatal(err)
	}
	if count != 2 {
		t.Fatalf("c-42 counted %d, want 2", count)
	}
	mux := http.NewServeMux()
	probes(mux, sharding)
	for _, path := range []string{"/ready", "/alive"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}

	other := actor.NewActorSystem()
	defer other.Shutdown()
	sender, senderStore, err := consulNode(ctx, other, "127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Leave(ctx)
	proxy, err := startSender(sender, senderStore)
	if err != nil {
		t.Fatal(err)
	}
	res, err := other.Root.RequestFuture(proxy, &counterpb.Increment{EntityId: "c-42"}, 30*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := res.(*counterpb.Counted).GetCount(); got != 3 {
		t.Fatalf("through the proxy c-42 counted %d, want 3", got)
	}
	keys, _, err := agent.Client().KV().Keys("protoshard/bank/sharding/Counter/", "", nil)
	if err != nil || len(keys) == 0 {
		t.Fatalf("no coordinator state under the cluster's name: %v %v", keys, err)
	}
}
