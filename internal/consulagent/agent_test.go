package consulagent_test

import (
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/consulagent"
)

func TestStartKVRestartLosesData(t *testing.T) {
	a := consulagent.Start(t)
	kv := a.Client().KV()
	if _, err := kv.Put(&api.KVPair{Key: "k", Value: []byte("v")}, nil); err != nil {
		t.Fatalf("put: %v", err)
	}
	p, _, err := kv.Get("k", nil)
	if err != nil || p == nil || string(p.Value) != "v" {
		t.Fatalf("get: %v %v", p, err)
	}
	addr := a.Addr()
	a.Restart(t)
	if a.Addr() != addr {
		t.Fatalf("address changed over restart: %s -> %s", addr, a.Addr())
	}
	p, _, err = kv.Get("k", nil)
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if p != nil {
		t.Fatalf("a dev agent must lose its data on restart, got %q", p.Value)
	}
}

func TestStopAndKill(t *testing.T) {
	a := consulagent.Start(t)
	a.Stop()
	if a.Running() {
		t.Fatal("running after Stop")
	}
	if _, err := a.Client().Status().Leader(); err == nil {
		t.Fatal("stopped agent still answers")
	}
	a.Restart(t)
	if _, err := a.Client().Status().Leader(); err != nil {
		t.Fatalf("restarted agent does not answer: %v", err)
	}
	a.Kill()
	if a.Running() {
		t.Fatal("running after Kill")
	}
	a.Stop() // stopping a stopped agent is a no-op
}

func TestTwoAgentsSideBySide(t *testing.T) {
	a := consulagent.Start(t)
	b := consulagent.Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two agents on one address %s", a.Addr())
	}
	for _, x := range []*consulagent.Agent{a, b} {
		if l, err := x.Client().Status().Leader(); err != nil || l == "" {
			t.Fatalf("agent %s: leader %q, %v", x.Addr(), l, err)
		}
	}
}
