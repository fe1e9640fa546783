package coordinatoractor_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/protoshard/protoshard/coordinatoractor"
	"github.com/protoshard/protoshard/coordinatoractor/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{NewStore: func(*testing.T) coordinatoractor.StateStore {
		return coordinatoractor.NewMemoryStore()
	}})
}

func TestMemoryStoreVersionsStepByOne(t *testing.T) {
	ctx := context.Background()
	m := coordinatoractor.NewMemoryStore()
	for want := uint64(1); want <= 5; want++ {
		v, err := m.Save(ctx, []byte("state"), want-1)
		if err != nil {
			t.Fatal(err)
		}
		if v != want {
			t.Fatalf("version = %d, want %d", v, want)
		}
	}
}

func TestMemoryStoreCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := coordinatoractor.NewMemoryStore()
	if _, err := m.Save(ctx, []byte("state"), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save = %v, want context.Canceled", err)
	}
	if _, _, err := m.Load(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Load = %v, want context.Canceled", err)
	}
	if _, v, err := m.Load(context.Background()); err != nil || v != 0 {
		t.Fatalf("Load = version %d, %v; want nothing stored", v, err)
	}
}

func TestMemoryStoreConcurrentLoadSave(t *testing.T) {
	// Writers that reload on conflict: no update is lost, and the final
	// version counts the successful writes.
	ctx := context.Background()
	m := coordinatoractor.NewMemoryStore()
	const writers, perWriter = 6, 20
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; {
				data, v, err := m.Load(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				n := 0
				if len(data) > 0 {
					if n, err = strconv.Atoi(string(data)); err != nil {
						errs[w] = fmt.Errorf("stored %q: %w", data, err)
						return
					}
				}
				if _, err := m.Save(ctx, strconv.AppendInt(nil, int64(n+1), 10), v); errors.Is(err, coordinatoractor.ErrVersionConflict) {
					continue
				} else if err != nil {
					errs[w] = err
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	data, v, err := m.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != writers*perWriter || string(data) != strconv.Itoa(writers*perWriter) {
		t.Fatalf("version %d with counter %s, want %d of each", v, data, writers*perWriter)
	}
}
