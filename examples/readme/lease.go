package readme

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	leaseconsul "github.com/protoshard/protoshard/lease/consul"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/singleton"
)

// startLeasedSingleton runs props as a singleton that holds a Consul lease.
func startLeasedSingleton(system *actor.ActorSystem, cluster *membership.Cluster, props *actor.Props) (*actor.PID, error) {
	leases, err := leaseconsul.NewProvider( // package lease/consul
		cluster.Name(), // the locks live under the cluster's keys
		leaseconsul.WithHeartbeatTimeout(10*time.Second), // the session TTL
	)
	if err != nil {
		return nil, err
	}
	// The same leases on every node; lease.NewMemoryLeases() in one process.
	return singleton.StartManager(system, cluster, props, "my-singleton", singleton.WithLease(leases))
}

// fencedWriter is a singleton that passes its fencing token with its writes.
type fencedWriter struct {
	write func(token uint64, value string) error
}

func (w *fencedWriter) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		// The lock's index, larger for every new holder. Pass it with writes,
		// so a store can refuse an earlier holder that lags behind.
		token, ok := singleton.FencingToken(ctx)
		if !ok {
			ctx.Stop(ctx.Self()) // started without a lease: nothing to fence with
			return
		}
		if err := w.write(token, "started"); err != nil {
			ctx.Stop(ctx.Self())
		}
	}
}
