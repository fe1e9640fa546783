package actorsharding_test

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

// quietSystem is an actor system that logs nothing, shut down at the
// test's end.
func quietSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	return system
}

// New refuses a node whose remote lacks the quarantine, and says how to
// install it.
func TestNewRefusesARemoteWithoutQuarantine(t *testing.T) {
	for name, build := range map[string]func(*actor.ActorSystem) membership.Config{
		"none": func(system *actor.ActorSystem) membership.Config {
			remote.NewRemote(system, remote.Configure("127.0.0.1", 0))
			return membership.Config{}
		},
		"not in the remote": func(system *actor.ActorSystem) membership.Config {
			remote.NewRemote(system, remote.Configure("127.0.0.1", 0))
			return membership.Config{Quarantine: membership.NewQuarantine()}
		},
		"not in the membership": func(system *actor.ActorSystem) membership.Config {
			remote.NewRemote(system, remote.Configure("127.0.0.1", 0, membership.NewQuarantine().RemoteOption()))
			return membership.Config{}
		},
	} {
		t.Run(name, func(t *testing.T) {
			system := quietSystem(t)
			cluster := membership.NewCluster(system, local.NewRegistry().Provider(), build(system))
			defer cluster.Close()
			_, err := actorsharding.New(system, cluster)
			if !errors.Is(err, membership.ErrNoQuarantine) {
				t.Fatalf("New: %v, want ErrNoQuarantine", err)
			}
			for _, how := range []string{"membership.NewQuarantine()", "RemoteOption()", "membership.Config.Quarantine"} {
				if !strings.Contains(err.Error(), how) {
					t.Errorf("the error does not say %s: %v", how, err)
				}
			}
		})
	}
}
