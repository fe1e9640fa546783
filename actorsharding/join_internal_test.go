package actorsharding

import (
	"testing"

	"github.com/asynkron/protoactor-go/remote"

	"github.com/protoshard/protoshard/internal/shardingconfig"
	"github.com/protoshard/protoshard/membership"
)

// In-process membership is for remotes that only this machine can reach:
// listening on a loopback address and advertising none other.
func TestLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		host, advertised string
		want             bool
	}{
		{"127.0.0.1", "", true},
		{"127.3.2.1", "", true},
		{"localhost", "", true},
		{"LocalHost", "", true},
		{"[::1]", "", true},
		{"::1", "", true},
		{"127.0.0.1", "127.0.0.2:4711", true},
		{"127.0.0.1", "localhost:4711", true},
		{"127.0.0.1", "[::1]:4711", true},
		{"", "", false}, // every interface
		{"0.0.0.0", "", false},
		{"[::]", "", false},
		{"10.0.0.1", "", false},
		{"node-1.example.com", "", false},
		{"127.0.0.1", "10.0.0.1:8090", false},
		{"127.0.0.1", "node-1.example.com:8090", false},
		{"10.0.0.1", "127.0.0.1:8090", false},
	} {
		addr, got := loopbackOnly(remote.Configure(tc.host, 8090))
		if tc.advertised != "" {
			addr, got = loopbackOnly(remote.Configure(tc.host, 8090, remote.WithAdvertisedHost(tc.advertised)))
		}
		if got != tc.want {
			t.Errorf("host %q advertised %q: loopback only %v, want %v", tc.host, tc.advertised, got, tc.want)
		}
		if !got && addr == "" {
			t.Errorf("host %q advertised %q: no address named", tc.host, tc.advertised)
		}
	}
}

// Join's remote starts with a small endpoint queue per peer, which the
// user's remote options can change; the quarantine's option comes last.
func TestJoinRemoteConfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []remote.ConfigOption
		wantQueue int
		wantErr   bool
	}{
		{"default", nil, shardingconfig.EndpointWriterQueueSize, false},
		{"user's size", []remote.ConfigOption{remote.WithEndpointWriterQueueSize(123)}, 123, false},
		{"proto.actor's size", []remote.ConfigOption{remote.WithEndpointWriterQueueSize(1_000_000)}, 1_000_000, false},
		{"other options only", []remote.ConfigOption{remote.WithEndpointWriterBatchSize(10)}, shardingconfig.EndpointWriterQueueSize, false},
		{"empty queue", []remote.ConfigOption{remote.WithEndpointWriterQueueSize(0)}, 0, true},
		{"empty batch", []remote.ConfigOption{remote.WithEndpointWriterBatchSize(0)}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := membership.NewQuarantine()
			cfg := joinConfig{host: "127.0.0.1", remote: tc.opts}
			rcfg, err := cfg.remoteConfig(q)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("accepted queue size %d, batch size %d", rcfg.EndpointWriterQueueSize, rcfg.EndpointWriterBatchSize)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rcfg.EndpointWriterQueueSize != tc.wantQueue {
				t.Errorf("queue size %d, want %d", rcfg.EndpointWriterQueueSize, tc.wantQueue)
			}
			if len(rcfg.ServerOptions) == 0 || len(rcfg.DialOptions) == 0 {
				t.Error("the quarantine's gRPC options are missing")
			}
		})
	}
}
