package delivery_test

import (
	"sync"
	"testing"

	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/actorsharding/delivery/queuetest"
)

func TestMemoryQueueContract(t *testing.T) {
	var mu sync.Mutex
	queues := map[string]delivery.DurableProducerQueue{}
	queuetest.Run(t, queuetest.Harness{Open: func(t *testing.T, name string) (delivery.DurableProducerQueue, error) {
		mu.Lock()
		defer mu.Unlock()
		if queues[name] == nil {
			queues[name] = delivery.NewMemoryQueue()
		}
		return queues[name], nil
	}})
}

func TestFileQueueContract(t *testing.T) {
	dir := t.TempDir()
	queuetest.Run(t, queuetest.Harness{Open: func(t *testing.T, name string) (delivery.DurableProducerQueue, error) {
		// A small limit, so that the oversize test stays small.
		return delivery.OpenFileQueue(dir, name, delivery.WithMaxMessageSentBytes(4<<10))
	}})
}
