package testsupport

import (
	"strings"
	"testing"
)

// NameOf derives a name for a lease, a queue or a key from the running
// test's name, so that subtests sharing one store do not meet.
func NameOf(t testing.TB) string {
	return strings.NewReplacer("/", "-", " ", "-").Replace(strings.ToLower(t.Name()))
}
