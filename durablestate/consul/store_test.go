package consul_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/durablestate"
	"github.com/protoshard/protoshard/durablestate/consul"
	"github.com/protoshard/protoshard/durablestate/storetest"
	"github.com/protoshard/protoshard/internal/consulagent"
)

func TestStore(t *testing.T) {
	client := consulagent.Start(t).Client()
	var n atomic.Int64
	storetest.Run(t, func(*testing.T) durablestate.Store {
		// One agent for all subtests; each gets a type of its own.
		return consul.New(client, "app", fmt.Sprintf("contract-%d", n.Add(1)))
	})
}

func TestKeyLayout(t *testing.T) {
	s := consul.New(&api.Client{}, "app/b", "bank/account")
	if got, want := s.Key("a/1"), "protoshard/app%2Fb/durable-state/bank%2Faccount/a%2F1"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}

func TestRefusesWhatNamesNoKey(t *testing.T) {
	client := consulagent.Start(t).Client()
	ctx := context.Background()
	for _, c := range []struct{ cluster, typeName, entity, want string }{
		{"", "t", "e", "empty cluster name"},
		{"app", "", "e", "empty entity type name"},
		{"app", "t", "", "invalid entity ID"},
	} {
		s := consul.New(client, c.cluster, c.typeName)
		if _, err := s.Save(ctx, c.entity, []byte("x"), 0, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Save in %q/%q of %q = %v, want %q", c.cluster, c.typeName, c.entity, err, c.want)
		}
	}
	s := consul.New(client, "app", "t")
	if _, err := s.Save(ctx, "big", make([]byte, consul.MaxPayloadBytes+1), 0, 1); err == nil {
		t.Error("Save of a payload above MaxPayloadBytes succeeded")
	}
	if _, err := client.KV().Put(&api.KVPair{Key: s.Key("raw"), Value: []byte("not a record")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "raw"); err == nil || !strings.Contains(err.Error(), "not a durable state record") {
		t.Errorf("Load of foreign bytes = %v, want an error", err)
	}
}
