package shardactor_test

import (
	"testing"

	"github.com/protoshard/protoshard/shardactor"
	"github.com/protoshard/protoshard/shardactor/remembertest"
)

func TestRememberEntitiesStoreContractMemory(t *testing.T) {
	remembertest.Run(t, remembertest.Harness{
		NewStore:       func(*testing.T) remembertest.Store { return shardactor.NewMemoryRememberEntitiesStore() },
		MaxBurstWrites: 1,
	})
}
