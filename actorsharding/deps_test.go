package actorsharding_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The Consul client is linked only by the packages that use Consul: users
// whose nodes all run in one process build sharding and singletons without
// it. The Consul stores live in actorsharding/consulstore for this reason.
func TestInProcessPackagesDoNotLinkConsul(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to list the dependencies with: %v", err)
	}
	const consulAPI = "github.com/hashicorp/consul/api"
	deps := func(pkgs ...string) []string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
		if err != nil {
			var stderr []byte
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				stderr = exitErr.Stderr
			}
			t.Fatalf("go list -deps %v: %v\n%s", pkgs, err, stderr)
		}
		return strings.Fields(string(out))
	}
	// The check finds the Consul client where it is linked.
	if !slices.Contains(deps("github.com/protoshard/protoshard/actorsharding/consulstore"), consulAPI) {
		t.Fatalf("go list -deps of consulstore does not list %s", consulAPI)
	}
	inProcess := []string{
		"github.com/protoshard/protoshard/actorsharding",
		"github.com/protoshard/protoshard/actorsharding/delivery",
		"github.com/protoshard/protoshard/coordinatoractor",
		"github.com/protoshard/protoshard/shardactor",
		"github.com/protoshard/protoshard/singleton",
		"github.com/protoshard/protoshard/membership/local",
		"github.com/protoshard/protoshard/shardeddaemonprocess",
		"github.com/protoshard/protoshard/durablestate",
	}
	for _, dep := range deps(inProcess...) {
		if strings.HasPrefix(dep, "github.com/hashicorp/consul") {
			t.Errorf("%v depend on %s", inProcess, dep)
		}
	}
}
