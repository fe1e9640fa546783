package actorsharding

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
)

type nopProcess struct{ n int }

func (p *nopProcess) SendUserMessage(*actor.PID, any)   { p.n++ }
func (p *nopProcess) SendSystemMessage(*actor.PID, any) {}
func (p *nopProcess) Stop(*actor.PID)                   {}

func BenchmarkRouteDirect(b *testing.B) {
	system := actor.NewActorSystem()
	cl := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
	table := newRouteTable(system, "T", &typeIDs{})
	ext := NewHashCodeMessageExtractor(100)
	p := &regionProcess{table: table, extractor: ext, cluster: cl, hosting: true, region: &nopProcess{}}
	target := &nopProcess{}
	msgs := make([]*testpb.Ping, 1000)
	for i := range msgs {
		id := fmt.Sprintf("entity-%d", i)
		msgs[i] = &testpb.Ping{EntityId: id}
		sr := table.shard(ext.ShardID(id))
		sr.open.Store(true)
		epid, _ := system.ProcessRegistry.Add(target, "entity/"+id)
		table.entities.swap(id, &entityRoute{shard: sr, pid: epid})
	}
	pid := actor.NewPID("x", "region")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.SendUserMessage(pid, msgs[i%len(msgs)])
	}
	b.StopTimer()
	if target.n != b.N {
		b.Fatalf("direct %d of %d", target.n, b.N)
	}

}
