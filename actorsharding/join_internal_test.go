package actorsharding

import (
	"testing"

	"github.com/asynkron/protoactor-go/remote"
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
