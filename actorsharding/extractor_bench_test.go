package actorsharding_test

import (
	"testing"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/testpb"
)

// Sinks keep the compiler from optimizing the benchmarked calls away.
var (
	benchSinkString string
	benchSinkAny    any
	benchSinkInt32  int32
)

// BenchmarkHashCodeExtractor measures what a region does per user message
// with the default extractor: EntityID, ShardID and UnwrapMessage, for a
// protobuf message that carries its entity_id (the message is passed as
// is) and for a ShardingEnvelope (whose Any payload is unpacked, a proto
// unmarshal per message).
func BenchmarkHashCodeExtractor(b *testing.B) {
	ex := actorsharding.NewHashCodeMessageExtractor(100)
	env, err := actorsharding.NewEnvelope("entity-0042", &testpb.Ping{Seq: 7, From: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		msg  any
	}{
		{"entity_id", &testpb.Ping{EntityId: "entity-0042", Seq: 7, From: "bench"}},
		{"envelope", env},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				id, err := ex.EntityID(c.msg)
				if err != nil {
					b.Fatal(err)
				}
				benchSinkString = ex.ShardID(id)
				m, err := ex.UnwrapMessage(c.msg)
				if err != nil {
					b.Fatal(err)
				}
				benchSinkAny = m
			}
		})
	}
}

// BenchmarkJavaStringHashCode measures the shard hash alone, for a short
// ASCII ID and a longer one with non-ASCII and non-BMP (surrogate pair)
// characters.
func BenchmarkJavaStringHashCode(b *testing.B) {
	cases := []struct{ name, id string }{
		{"short_ascii", "entity-0042"},
		{"long_unicode", "użytkownik-Zürich-東京都-ßπж-🎉🚀-0123456789-order/2024-06-30T12:34:56Z"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.id)))
			for b.Loop() {
				benchSinkInt32 = actorsharding.JavaStringHashCode(c.id)
			}
		})
	}
}
