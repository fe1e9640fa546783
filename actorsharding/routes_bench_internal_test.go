package actorsharding

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/membershiphook"
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
	table := newRouteTable(system, "T")
	ext := NewHashCodeMessageExtractor(100)
	p := &regionProcess{table: table, extractor: ext, cluster: cl, stale: membershiphook.Of(cl).Stale, hosting: true, region: &nopProcess{}}
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

// BenchmarkRouteWithoutEntityID: the router's share of a message that
// names no entity, which it hands to the region actor (that reports why);
// and the region actor's check, for such a message of an EntityRef on its
// way to another node, whether it can go as it is.
func BenchmarkRouteWithoutEntityID(b *testing.B) {
	p, region := newHostingRouter()
	ext := p.extractor
	msg := &testpb.Ping{Seq: 1}
	pid := actor.NewPID("x", "region")
	b.Run("router", func(b *testing.B) {
		b.ReportAllocs()
		region.n = 0
		for b.Loop() {
			p.SendUserMessage(pid, msg)
		}
		if region.n != b.N {
			b.Fatalf("the region actor got %d of %d", region.n, b.N)
		}
	})
	b.Run("sendsAsItIs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if sendsAsItIs(ext, "e", msg) {
				b.Fatal("a message that names no entity goes as it is")
			}
		}
	})
}

// newHostingRouter is the router of a region that hosts entities and has
// none, with the default extractor, in front of region.
func newHostingRouter() (*regionProcess, *nopProcess) {
	system := actor.NewActorSystem()
	cl := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{})
	region := &nopProcess{}
	return &regionProcess{table: newRouteTable(system, "T"), extractor: NewHashCodeMessageExtractor(100), cluster: cl, stale: membershiphook.Of(cl).Stale,
		hosting: true, region: region}, region
}
