package consul_test

import (
	"slices"
	"testing"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/membership/consul"
)

// A provider without WithLogger logs through the actor system of the
// Cluster that uses it, with the system's attributes; one with a
// WithLogger keeps logging there.
func TestProviderLogsThroughTheClustersSystem(t *testing.T) {
	agent := consulagent.Start(t)
	registered := func(logs *testsupport.Logs, node string) bool {
		return slices.ContainsFunc(logs.Lines(), func(l testsupport.LogLine) bool {
			return l.Message == "registered" && l.Attrs["component"] == "consul-membership" && l.Attrs["node"] == node
		})
	}

	var system testsupport.Logs
	n := newNode(t, agent, system.Logger(), "default", nodeOpts{
		noProviderLogger: true,
	})
	n.join(t)
	if !registered(&system, "default") {
		t.Fatalf("the system's log has no registration line of the provider: %v", system.Lines())
	}

	var own, otherSystem testsupport.Logs
	m := newNode(t, agent, otherSystem.Logger(), "explicit", nodeOpts{
		options: []consul.Option{consul.WithLogger(own.Logger().With("node", "explicit"))},
	})
	m.join(t)
	if !registered(&own, "explicit") {
		t.Fatalf("the configured logger has no registration line: %v", own.Lines())
	}
	if slices.ContainsFunc(otherSystem.Lines(), func(l testsupport.LogLine) bool { return l.Attrs["component"] == "consul-membership" }) {
		t.Fatalf("a provider with its own logger logged to the system's: %v", otherSystem.Lines())
	}
}
