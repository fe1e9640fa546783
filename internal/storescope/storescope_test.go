package storescope

import (
	"errors"
	"strings"
	"testing"
)

type scoped struct{ cluster, typeName string }

func (s scoped) ClusterName() string { return s.cluster }
func (s scoped) TypeName() string    { return s.typeName }

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name  string
		store any
		fails bool
	}{
		{"same cluster and type", scoped{"app-a", "Counter"}, false},
		{"another cluster", scoped{"app-b", "Counter"}, true},
		{"another type", scoped{"app-a", "Account"}, true},
		{"arguments swapped", scoped{"Counter", "app-a"}, true},
		{"empty cluster name", scoped{"", "Counter"}, true},
		{"a store without names", struct{}{}, false},
		{"nil", nil, false},
	} {
		err := Check("state store", c.store, "app-a", "Counter")
		if got := err != nil; got != c.fails {
			t.Errorf("%s: %v, want failure %v", c.name, err, c.fails)
		}
		if err != nil && (!errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), `this is cluster "app-a", entity type "Counter"`)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
