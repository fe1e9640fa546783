package consulstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/actorsharding/consulstore"
	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/coordinatoractor/storetest"
	"github.com/protoshard/protoshard/internal/consulagent"
)

func TestStateStore(t *testing.T) {
	agent := consulagent.Start(t)
	client := agent.Client()
	var n atomic.Int64
	storetest.Run(t, storetest.Harness{NewStore: func(t *testing.T) coordinatoractor.StateStore {
		// One agent for all subtests; each gets its own key.
		typeName := fmt.Sprintf("contract-%d", n.Add(1))
		s := consulstore.NewStateStore(client, testCluster, typeName)
		if want := consulstore.StateKey(testCluster, typeName); s.Key() != want {
			t.Fatalf("Key() = %q, want %q", s.Key(), want)
		}
		return s
	}})
}

// sampleState stands for an encoded state: a store never looks inside.
var sampleState = []byte("\x0a\x10coordinator state\x00")

// testCluster is the cluster name of the tests' stores.
const testCluster = "app"

func TestStateKey(t *testing.T) {
	for _, c := range []struct{ cluster, typeName, want string }{
		{testCluster, "user", "protoshard/app/sharding/user/coordinator-state"},
		{"app/b", "user", "protoshard/app%2Fb/sharding/user/coordinator-state"},
		{".hidden", "a/b", "protoshard/%2Ehidden/sharding/a/b/coordinator-state"},
	} {
		if got := consulstore.StateKey(c.cluster, c.typeName); got != c.want {
			t.Errorf("StateKey(%q, %q) = %q, want %q", c.cluster, c.typeName, got, c.want)
		}
	}
	s := consulstore.NewStateStore(nil, "app-a", "Counter")
	if s.Key() != consulstore.StateKey("app-a", "Counter") || s.ClusterName() != "app-a" || s.TypeName() != "Counter" {
		t.Errorf("store of app-a/Counter: key %q, cluster %q, type %q", s.Key(), s.ClusterName(), s.TypeName())
	}
}

// Two clusters with an entity type of the same name keep two states.
func TestStateStoresOfTwoClustersKeepApart(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	a := consulstore.NewStateStore(client, "app-a", "Counter")
	b := consulstore.NewStateStore(client, "app-b", "Counter")
	va, err := a.Save(ctx, sampleState, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, vb, err := b.Load(ctx); err != nil || vb != 0 {
		t.Fatalf("app-b loads version %d, %v after app-a saved; want its own empty state", vb, err)
	}
	if _, err := b.Save(ctx, nil, 0); err != nil {
		t.Fatalf("app-b's first save: %v", err)
	}
	if _, err := a.Save(ctx, sampleState, va); err != nil {
		t.Fatalf("app-a's save after app-b's: %v", err)
	}
}

// Without a cluster name, or with a type name that is no clean key path,
// nothing is read or written.
func TestStateStoreRefusesBadNames(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	for _, s := range []*consulstore.StateStore{
		consulstore.NewStateStore(client, "", "Counter"),
		consulstore.NewStateStore(client, testCluster, ""),
		consulstore.NewStateStore(client, testCluster, "a//b"),
	} {
		if _, _, err := s.Load(ctx); err == nil {
			t.Errorf("Load of %s succeeded", s.Key())
		}
		if _, err := s.Save(ctx, nil, 0); err == nil {
			t.Errorf("Save of %s succeeded", s.Key())
		}
	}
	if keys, _, err := client.KV().Keys("protoshard/", "", nil); err != nil || len(keys) != 0 {
		t.Fatalf("keys written: %q, %v", keys, err)
	}
}

func TestStateStoreVersionIsModifyIndex(t *testing.T) {
	agent := consulagent.Start(t)
	ctx := context.Background()
	typeName := "modify-index"
	key := consulstore.StateKey(testCluster, typeName)
	s := consulstore.NewStateStore(agent.Client(), testCluster, typeName)
	for i := range 3 {
		_, v, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nv, err := s.Save(ctx, sampleState, v)
		if err != nil {
			t.Fatalf("Save #%d: %v", i, err)
		}
		pair, _, err := agent.Client().KV().Get(key, nil)
		if err != nil || pair == nil {
			t.Fatalf("Get: %v, %v", pair, err)
		}
		if pair.ModifyIndex != nv {
			t.Fatalf("Save #%d returned %d, key's ModifyIndex is %d", i, nv, pair.ModifyIndex)
		}
	}
}

func TestStateStoreFencesOtherWriters(t *testing.T) {
	agent := consulagent.Start(t)
	ctx := context.Background()
	kv := agent.Client().KV()

	t.Run("foreign put", func(t *testing.T) {
		typeName := "foreign-put"
		key := consulstore.StateKey(testCluster, typeName)
		s := consulstore.NewStateStore(agent.Client(), testCluster, typeName)
		v, err := s.Save(ctx, sampleState, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(&api.KVPair{Key: key, Value: []byte("another state")}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Save(ctx, sampleState, v); !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("Save after a foreign write = %v, want ErrVersionConflict", err)
		}
	})

	t.Run("key deleted", func(t *testing.T) {
		// Consul lost or someone reset the state: the old version is gone,
		// and writing it back would resurrect a stale state.
		typeName := "deleted"
		key := consulstore.StateKey(testCluster, typeName)
		s := consulstore.NewStateStore(agent.Client(), testCluster, typeName)
		v, err := s.Save(ctx, sampleState, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Delete(key, nil); err != nil {
			t.Fatal(err)
		}
		_, err = s.Save(ctx, sampleState, v)
		if !errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Fatalf("Save after delete = %v, want ErrVersionConflict", err)
		}
		if !strings.Contains(err.Error(), "stored version is 0") {
			t.Errorf("error %q does not name the stored version", err)
		}
		if pair, _, err := kv.Get(key, nil); err != nil || pair != nil {
			t.Fatalf("key after refused Save: %v, %v; want absent", pair, err)
		}
	})
}

func TestStateStoreSaveCancelledContext(t *testing.T) {
	agent := consulagent.Start(t)
	s := consulstore.NewStateStore(agent.Client(), testCluster, "cancelled")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Save(ctx, sampleState, 0)
	if err == nil {
		t.Fatal("Save with a cancelled context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Save error %v does not wrap context.Canceled", err)
	}
	if _, _, err := s.Load(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with a cancelled context = %v, want context.Canceled", err)
	}
	if _, v, err := s.Load(context.Background()); err != nil || v != 0 {
		t.Fatalf("Load = version %d, %v; want nothing stored", v, err)
	}
}

func TestStateStoreStoppedAgent(t *testing.T) {
	agent := consulagent.Start(t)
	s := consulstore.NewStateStore(agent.Client(), testCluster, "stopped")
	v, err := s.Save(context.Background(), sampleState, 0)
	if err != nil {
		t.Fatal(err)
	}
	agent.Stop()

	const deadline = 2 * time.Second
	for name, op := range map[string]func(context.Context) error{
		"Load": func(ctx context.Context) error { _, _, err := s.Load(ctx); return err },
		"Save": func(ctx context.Context) error { _, err := s.Save(ctx, sampleState, v); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		err := op(ctx)
		elapsed := time.Since(start)
		cancel()
		if err == nil {
			t.Errorf("%s against a stopped agent succeeded", name)
		} else if errors.Is(err, coordinatoractor.ErrVersionConflict) {
			t.Errorf("%s against a stopped agent = %v, must not be a version conflict", name, err)
		}
		if elapsed > deadline+time.Second {
			t.Errorf("%s took %v, ctx deadline was %v", name, elapsed, deadline)
		}
	}
}

func TestStateStoreOversizedStateIsNoConflict(t *testing.T) {
	agent := consulagent.Start(t)
	ctx := context.Background()
	s := consulstore.NewStateStore(agent.Client(), testCluster, "oversized")
	v, err := s.Save(ctx, sampleState, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Save(ctx, make([]byte, consulstore.MaxStateBytes+1), v)
	if err == nil {
		t.Fatal("Save of an oversized state succeeded")
	}
	if errors.Is(err, coordinatoractor.ErrVersionConflict) || !errors.Is(err, coordinatoractor.ErrStateTooLarge) {
		t.Fatalf("Save of an oversized state = %v, want coordinatoractor.ErrStateTooLarge, not a version conflict", err)
	}
	t.Logf("oversized Save: %.300s", err)
	if _, lv, err := s.Load(ctx); err != nil || lv != v {
		t.Fatalf("Load = version %d, %v; want %d", lv, err, v)
	}
	// The largest state allowed fits Consul's transaction.
	largest := make([]byte, consulstore.MaxStateBytes)
	for i := range largest {
		largest[i] = byte(i)
	}
	nv, err := s.Save(ctx, largest, v)
	if err != nil {
		t.Fatalf("Save of %d bytes: %v", len(largest), err)
	}
	if got, lv, err := s.Load(ctx); err != nil || lv != nv || !bytes.Equal(got, largest) {
		t.Fatalf("Load = %d bytes at version %d, %v; want the %d bytes saved at %d", len(got), lv, err, len(largest), nv)
	}
}

// TestStateStoreRolledBackWithoutConflict fakes Consul's HTTP API to
// reach what a dev agent without ACLs cannot produce: a CAS transaction
// rolled back for another reason than a moved index. Only a moved index is
// a conflict; anything else is a plain error the coordinator may retry.
func TestStateStoreRolledBackWithoutConflict(t *testing.T) {
	const key = "protoshard/app/sharding/fake/coordinator-state"
	const stored = 5
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/v1/txn":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"Results":null,"Errors":[{"OpIndex":0,"What":"Permission denied"}]}`)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/kv/"+key:
			if _, ok := r.URL.Query()["consistent"]; !ok {
				t.Errorf("read without ?consistent: %s", r.URL)
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Consul-Index", strconv.Itoa(stored))
			fmt.Fprintf(w, `[{"Key":%q,"CreateIndex":1,"ModifyIndex":%d,"Value":null}]`, key, stored)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL)
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := api.DefaultConfig()
	cfg.Address = strings.TrimPrefix(srv.URL, "http://")
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := consulstore.NewStateStore(client, testCluster, "fake")
	ctx := context.Background()

	_, err = s.Save(ctx, nil, stored)
	if err == nil || errors.Is(err, coordinatoractor.ErrVersionConflict) || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("Save at the stored version = %v, want a non-conflict error naming the cause", err)
	}
	_, err = s.Save(ctx, nil, stored-1)
	if !errors.Is(err, coordinatoractor.ErrVersionConflict) {
		t.Fatalf("Save at an old version = %v, want ErrVersionConflict", err)
	}
}
