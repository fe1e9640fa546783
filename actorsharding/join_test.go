package actorsharding_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership/local"
)

// joinNode joins system and leaves at the test's end.
func joinNode(t *testing.T, system *actor.ActorSystem, opts ...actorsharding.JoinOption) *actorsharding.Sharding {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := actorsharding.Join(ctx, system, opts...)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Leave(ctx); err != nil {
			t.Errorf("leave: %v", err)
		}
	})
	return s
}

// Without WithMembership, Join refuses a remote that other hosts could
// reach, before it starts anything: each process would be a cluster of
// its own.
func TestJoinWithoutMembershipNeedsLoopback(t *testing.T) {
	cases := map[string][]actorsharding.JoinOption{
		"every IPv4 interface": {actorsharding.WithAddress("0.0.0.0", 0)},
		"every interface":      {actorsharding.WithAddress("", 0)},
		"advertised elsewhere": {actorsharding.WithRemoteOptions(remote.WithAdvertisedHost("10.0.0.1:8090"))},
	}
	if ip := hostIP(); ip != "" {
		cases["this host's address "+ip] = []actorsharding.JoinOption{actorsharding.WithAddress(ip, 0)}
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			system := quietSystem(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := actorsharding.Join(ctx, system, opts...)
			if !errors.Is(err, actorsharding.ErrNoMembership) {
				if err == nil {
					_ = s.Leave(ctx)
				}
				t.Fatalf("Join: %v, want ErrNoMembership", err)
			}
			if !strings.Contains(err.Error(), "WithMembership") {
				t.Errorf("the error does not name WithMembership: %v", err)
			}
			if system.Address() != "nonhost" {
				t.Errorf("the remote started at %s", system.Address())
			}
		})
	}
}

// hostIP is a non-loopback address of this machine, or "".
func hostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// The advertised host of WithRemoteOptions is the node's address, and
// with it, in-process membership on a loopback address.
func TestJoinAdvertisedHost(t *testing.T) {
	skipUnderRace(t)
	system := quietSystem(t)
	s := joinNode(t, system, actorsharding.WithRemoteOptions(remote.WithAdvertisedHost("127.0.0.2:4711")))
	if got := system.Address(); got != "127.0.0.2:4711" {
		t.Errorf("system address %s, want the advertised 127.0.0.2:4711", got)
	}
	if got := s.Cluster().Self().Address; got != "127.0.0.2:4711" {
		t.Errorf("member address %s, want the advertised 127.0.0.2:4711", got)
	}
}

// Server and dial options given to Join reach the remote's gRPC server and
// connections, and do not remove the quarantine.
func TestJoinRemoteOptions(t *testing.T) {
	skipUnderRace(t)
	var served, dialled atomic.Int64
	registry := local.NewRegistry()
	a := quietSystem(t)
	sa := joinNode(t, a, actorsharding.WithMembership(registry.Provider()), actorsharding.WithRemoteOptions(
		remote.WithServerOptions(grpc.ChainStreamInterceptor(
			func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
				served.Add(1)
				return handler(srv, ss)
			})),
		remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithChainStreamInterceptor(
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				dialled.Add(1)
				return streamer(ctx, desc, cc, method, opts...)
			})),
	))
	if err := membershiphook.Of(sa.Cluster()).CheckQuarantine(); err != nil {
		t.Fatalf("the remote options removed the quarantine: %v", err)
	}
	b := quietSystem(t)
	joinNode(t, b, actorsharding.WithMembership(registry.Provider()))
	echo, err := b.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*testpb.Ping); ok {
			ctx.Respond(&testpb.Pong{Seq: p.Seq})
		}
	}), "echo")
	if err != nil {
		t.Fatal(err)
	}
	// a dials b to ask; b dials a's server to answer.
	res, err := a.Root.RequestFuture(echo, &testpb.Ping{Seq: 7}, 20*time.Second).Result()
	if err != nil {
		t.Fatalf("ask across the nodes: %v", err)
	}
	if p, ok := res.(*testpb.Pong); !ok || p.Seq != 7 {
		t.Fatalf("answer %v, want Pong 7", res)
	}
	if dialled.Load() == 0 {
		t.Error("a's dial option did not reach its connection to b")
	}
	if served.Load() == 0 {
		t.Error("a's server option did not reach its gRPC server")
	}
}

// A remote that cannot listen fails Join with an error, not a panic.
func TestJoinOnATakenPort(t *testing.T) {
	skipUnderRace(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	system := quietSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := actorsharding.Join(ctx, system, actorsharding.WithAddress("127.0.0.1", taken.Addr().(*net.TCPAddr).Port),
		actorsharding.WithMembership(local.NewRegistry().Provider()))
	if err == nil {
		_ = s.Leave(ctx)
		t.Fatal("Join on a taken port: no error")
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("the error does not say why: %v", err)
	}
}
