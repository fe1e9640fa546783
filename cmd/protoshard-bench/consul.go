package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/consul/api"
	"github.com/protoshard/protoshard/internal/consulagent"
)

// consulAgent is a throwaway Consul dev agent on free loopback ports
// (internal/consulagent's Launch), for the membership of the two processes
// of the remote, failover and grains-remote sections.
type consulAgent struct {
	addr   string
	client *api.Client
	agent  *consulagent.Agent
	dir    string
}

// consulBinary finds the Consul binary the two-process sections need;
// without one the section is skipped, with the reason.
func consulBinary() (string, error) {
	bin, err := consulagent.Binary()
	if err != nil {
		return "", &skipError{reason: fmt.Sprintf("two processes need Consul membership, and %v (run scripts/install-consul.sh or set PROTOSHARD_CONSUL)", err)}
	}
	return bin, nil
}

// startConsul starts an agent that logs into a temporary directory; without
// a Consul binary it returns consulBinary's skipError.
func startConsul() (*consulAgent, error) {
	bin, err := consulBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "protoshard-bench-consul-")
	if err != nil {
		return nil, fmt.Errorf("consul agent: %w", err)
	}
	a, err := consulagent.Launch(bin, filepath.Join(dir, "consul.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("consul agent: %w", err)
	}
	return &consulAgent{addr: a.Addr(), client: a.Client(), agent: a, dir: dir}, nil
}

// stop stops the agent and removes its directory.
func (a *consulAgent) stop() {
	a.agent.Stop()
	_ = os.RemoveAll(a.dir)
}
