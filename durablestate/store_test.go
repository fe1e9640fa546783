package durablestate_test

import (
	"testing"

	"github.com/protoshard/protoshard/durablestate"
	"github.com/protoshard/protoshard/durablestate/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) durablestate.Store { return durablestate.NewMemoryStore() })
}
