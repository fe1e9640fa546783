package readme

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
)

// memoryAccounts is an accountStore in memory.
type memoryAccounts struct {
	mu   sync.Mutex
	recs map[string]record
}

func (m *memoryAccounts) Load(id string) (record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recs[id], nil
}

func (m *memoryAccounts) CompareAndSave(id string, next record, version uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recs[id].Version != version {
		return errors.New("version conflict")
	}
	m.recs[id] = next
	return nil
}

// TestReliableDeliverySnippet runs the producer and entity of docs/reliable-delivery.md: both
// deposits end up in the store, once each.
func TestReliableDeliverySnippet(t *testing.T) {
	ctx, _, sharding := joinedNode(t, time.Minute)
	db := &memoryAccounts{recs: map[string]record{}}
	props := actor.PropsFromProducer(func() actor.Actor { return &reliableAccount{db: db} })
	if _, err := sharding.StartRegion("Account", props, actorsharding.NewHashCodeMessageExtractor(10)); err != nil {
		t.Fatal(err)
	}
	producer, err := startPayments(ctx, sharding)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Stop(ctx)
	rec, _ := db.Load("acc-42")
	if rec.Balance != 15 || rec.Version != 2 {
		t.Fatalf("stored %+v, want balance 15 at version 2", rec)
	}
}
