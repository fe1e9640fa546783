package consul_test

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/protoshard/protoshard/internal/consulagent"
	"github.com/protoshard/protoshard/internal/leaselog"
	"github.com/protoshard/protoshard/internal/testsupport"
	"github.com/protoshard/protoshard/lease/consul"
)

// A lease made with leaselog.NewLease, as the singleton manager and the shard
// make theirs, logs to the logger it is handed (their actor system's),
// unless the provider was configured with a logger of its own.
func TestConsulLeaseLogsToTheHoldersLogger(t *testing.T) {
	agent := consulagent.Start(t)
	opts := testOptions(agent.Client())
	hold := func(opts []consul.Option, owner string, logger *slog.Logger) {
		t.Helper()
		p, err := consul.NewProvider(testCluster, opts...)
		if err != nil {
			t.Fatal(err)
		}
		l, err := leaselog.NewLease(p, "logs", owner, logger)
		if err != nil {
			t.Fatal(err)
		}
		acquire(t, l, nil)
		if ok, err := l.Release(ctxFor(t)); !ok || err != nil {
			t.Fatalf("Release = (%v, %v)", ok, err)
		}
	}
	logged := func(logs *testsupport.Logs, msg, owner string) bool {
		return slices.ContainsFunc(logs.Lines(), func(l testsupport.LogLine) bool {
			return l.Message == msg && l.Attrs["owner"] == owner && l.Attrs["component"] == "consul-lease"
		})
	}

	var holder testsupport.Logs
	hold(opts, "owner-a", holder.Logger())
	for _, msg := range []string{"consul lease acquired", "consul lease released"} {
		if !logged(&holder, msg, "owner-a") {
			t.Fatalf("the holder's log has no %q: %v", msg, holder.Lines())
		}
	}

	var provider, otherHolder testsupport.Logs
	hold(append(opts, consul.WithLogger(provider.Logger())), "owner-b", otherHolder.Logger())
	if !logged(&provider, "consul lease acquired", "owner-b") {
		t.Fatalf("the provider's configured logger has no acquisition: %v", provider.Lines())
	}
	if lines := otherHolder.Lines(); len(lines) > 0 {
		t.Fatalf("a provider with its own logger logged to the holder's: %v", lines)
	}
}
