package consulstore_test

import (
	"fmt"

	"github.com/protoshard/protoshard/actorsharding/consulstore"
)

// Every key lies under the cluster's name: two clusters with an entity
// type of the same name keep apart. Pass sharding.Cluster().Name().
func ExampleStateKey() {
	fmt.Println(consulstore.StateKey("app-a", "Counter"))
	fmt.Println(consulstore.StateKey("app-b", "Counter"))
	// Output:
	// protoshard/app-a/sharding/Counter/coordinator-state
	// protoshard/app-b/sharding/Counter/coordinator-state
}
