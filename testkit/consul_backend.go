package testkit

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/consul"
)

// defaultConsulTTL is short so that crash tests do not wait long for the
// check to expire, yet three refreshes fit in it, so that a loaded machine
// does not make a live node look crashed.
const defaultConsulTTL = 3 * time.Second

// ConsulBackend is a Backend over a throwaway Consul dev agent: each node
// registers as a service with a TTL check. A crash needs no help: the
// crashed node stops refreshing its check, which turns critical after TTL.
type ConsulBackend struct {
	// Agent is the Consul agent the nodes register with. It is nil in a
	// child process (ChildProcess.ConsulBackend): the parent owns it.
	Agent *consulagent.Agent
	// TTL is the nodes' health check TTL: how long a crash takes to be
	// seen. Tests waiting for a crash's removal should allow a few TTLs.
	TTL time.Duration

	client *api.Client // a child process's client of its parent's agent
}

// Client returns an API client for the backend's agent.
func (b *ConsulBackend) Client() *api.Client {
	if b.client != nil {
		return b.client
	}
	return b.Agent.Client()
}

// NewConsulBackend starts a Consul dev agent for the test (skipping it when
// no Consul binary is available, see consulagent) and returns a backend
// over it.
func NewConsulBackend(t testing.TB) *ConsulBackend {
	t.Helper()
	return &ConsulBackend{Agent: consulagent.Start(t), TTL: defaultConsulTTL}
}

// NewProvider returns a consul provider of the agent.
func (b *ConsulBackend) NewProvider() (membership.Provider, error) {
	p, err := consul.New(consul.WithClient(b.Client()), consul.WithTTL(b.TTL))
	if err != nil {
		return nil, fmt.Errorf("consul provider: %w", err)
	}
	return p, nil
}

// Crashed does nothing: the crashed node's TTL check expires by itself.
func (b *ConsulBackend) Crashed(*Node) {}
