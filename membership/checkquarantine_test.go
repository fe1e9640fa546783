package membership_test

import (
	"errors"
	"testing"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

// CheckQuarantine finds a quarantine missing from the membership config,
// one whose RemoteOption never went into a remote config, and one whose
// gRPC options a later remote option replaced.
func TestCheckQuarantine(t *testing.T) {
	serverOpts := remote.WithServerOptions(grpc.MaxRecvMsgSize(8 << 20))
	dialOpts := remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))
	for _, tc := range []struct {
		name string
		// configure builds the remote config with q (nil: no remote config
		// has seen q) and returns the quarantine the Cluster gets.
		configure func(q *membership.Quarantine) *membership.Quarantine
		ok        bool
	}{
		{"installed", func(q *membership.Quarantine) *membership.Quarantine {
			remote.Configure("127.0.0.1", 0, q.RemoteOption())
			return q
		}, true},
		{"installed after server and dial options", func(q *membership.Quarantine) *membership.Quarantine {
			remote.Configure("127.0.0.1", 0, serverOpts, dialOpts, q.RemoteOption())
			return q
		}, true},
		{"no quarantine in the membership config", func(q *membership.Quarantine) *membership.Quarantine {
			remote.Configure("127.0.0.1", 0, q.RemoteOption())
			return nil
		}, false},
		{"no quarantine in the remote config", func(q *membership.Quarantine) *membership.Quarantine {
			remote.Configure("127.0.0.1", 0)
			return q
		}, false},
		{"another quarantine in the remote config", func(q *membership.Quarantine) *membership.Quarantine {
			remote.Configure("127.0.0.1", 0, membership.NewQuarantine().RemoteOption())
			return q
		}, false},
		{"server options replaced after it", func(q *membership.Quarantine) *membership.Quarantine {
			remote.Configure("127.0.0.1", 0, q.RemoteOption(), serverOpts)
			return q
		}, false},
		{"dial options replaced after it", func(q *membership.Quarantine) *membership.Quarantine {
			remote.Configure("127.0.0.1", 0, q.RemoteOption(), dialOpts)
			return q
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			system := quietSystem()
			defer system.Shutdown()
			c := membership.NewCluster(system, local.NewRegistry().Provider(),
				membership.Config{Quarantine: tc.configure(membership.NewQuarantine())})
			defer c.Close()
			err := membershiphook.Of(c).CheckQuarantine()
			if tc.ok && err != nil {
				t.Fatalf("CheckQuarantine: %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, membership.ErrNoQuarantine) {
				t.Fatalf("CheckQuarantine: %v, want ErrNoQuarantine", err)
			}
		})
	}
}
