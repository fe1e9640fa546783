package shardeddaemonprocess_test

import (
	"testing"

	"github.com/protoshard/protoshard/shardeddaemonprocess"
	"github.com/protoshard/protoshard/shardeddaemonprocess/storetest"
)

func TestMemoryStore(t *testing.T) { storetest.Run(t, shardeddaemonprocess.NewMemoryStore()) }
