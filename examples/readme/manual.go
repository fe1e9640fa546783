package readme

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/membership"
)

// manualNode is the manual path of docs/sharding.md: the node's remote and
// membership.Cluster are the user's own, and actorsharding.New makes the
// Sharding.
type manualNode struct {
	remote   *remote.Remote
	cluster  *membership.Cluster
	sharding *actorsharding.Sharding
}

func startManually(ctx context.Context, system *actor.ActorSystem, provider membership.Provider) (*manualNode, error) {
	// The quarantine refuses what a removed member still sends (a paused or
	// cut-off node), and keeps this node from dialling it. Its RemoteOption
	// goes last: actorsharding.New refuses a node without it.
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
	r.Start() // membership needs the node's real address
	cluster := membership.NewCluster(system, provider, membership.Config{Quarantine: quarantine})
	if err := cluster.Join(ctx); err != nil {
		cluster.Close()
		r.Shutdown(false)
		return nil, err
	}
	sharding, err := actorsharding.New(system, cluster)
	if err != nil {
		cluster.Close()
		r.Shutdown(false)
		return nil, err
	}
	return &manualNode{remote: r, cluster: cluster, sharding: sharding}, nil
}

// leave hands the node's shards and singletons off, then stops what
// startManually started.
func (n *manualNode) leave(ctx context.Context) error {
	err := n.cluster.Leave(ctx)
	n.cluster.Close()
	n.remote.Shutdown(true)
	return err
}
