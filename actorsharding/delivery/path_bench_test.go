package delivery

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/internal/testpb"
)

// BenchmarkReliablePath is one message's way through the value types, as
// the bench's throughput workload drives them: accepted by the producer,
// taken and unpacked by its entity's consumer (in short form, as on
// another node), confirmed; the consumer's
// Requests go back to the producer. 100 entities, round robin.
func BenchmarkReliablePath(b *testing.B) {
	const entities = 100
	controller := actor.NewPID("127.0.0.1:8090", "delivery/T/bench")
	p := newProducerState("bench", controller, producerSettings{}, nil)
	cons := make([]*consumers, entities)
	ids := make([]string, entities)
	msgs := make([]*testpb.Ping, entities)
	for i := range cons {
		var err error
		if cons[i], err = newConsumers(consumerSettings{}, nil); err != nil {
			b.Fatal(err)
		}
		ids[i] = fmt.Sprintf("entity-%d", i)
		msgs[i] = &testpb.Ping{EntityId: ids[i], Seq: int64(i)}
	}
	now := time.Unix(1000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		e := i % entities
		out, err := p.accept(&sendRequest{entityID: ids[e], msg: msgs[e]}, now)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range out.send {
			if _, err := p.forSending(m, true); err != nil { // as to an entity on another node
				b.Fatal(err)
			}
			co := cons[e].onSequenced(m, controller, now)
			for co.deliver != nil {
				d := co.deliver
				if _, err := payloadOf(d, co.payloadType); err != nil {
					b.Fatal(err)
				}
				if co.request != nil {
					if _, err := p.onRequest(co.request, now); err != nil {
						b.Fatal(err)
					}
				}
				if co, err = cons[e].onConfirmed(d.GetProducerId(), d.GetSeqNr(), now); err != nil {
					b.Fatal(err)
				}
			}
			if co.request != nil {
				if _, err := p.onRequest(co.request, now); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}
