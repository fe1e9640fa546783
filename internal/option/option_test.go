package option

import (
	"errors"
	"testing"
	"time"
)

var errInvalid = errors.New("invalid option")

type config struct{ n int }

type opt func(*config) error

func TestApply(t *testing.T) {
	var c config
	set := func(n int) opt { return func(c *config) error { c.n = n; return AtLeastOne(errInvalid, "set", n) } }
	if err := Apply(&c, []opt{set(1), set(2)}, errInvalid); err != nil || c.n != 2 {
		t.Fatalf("Apply = %v, n %d; want nil, 2 (in order)", err, c.n)
	}
	if err := Apply(&c, []opt{set(0), set(3)}, errInvalid); !errors.Is(err, errInvalid) || c.n != 0 {
		t.Fatalf("Apply = %v, n %d; want the first error, stopping there", err, c.n)
	}
	if err := Apply(&c, []opt{nil}, errInvalid); !errors.Is(err, errInvalid) {
		t.Fatalf("Apply(nil option) = %v", err)
	}
}

func TestChecks(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		want string
	}{
		"zero duration":     {Positive(errInvalid, "WithX", 0), "invalid option: WithX: 0s is not positive"},
		"positive duration": {Positive(errInvalid, "WithX", time.Second), ""},
		"zero count":        {AtLeastOne(errInvalid, "WithN", 0), "invalid option: WithN: 0 is below 1"},
		"count":             {AtLeastOne(errInvalid, "WithN", 1), ""},
		"nil pointer":       {NotNil[*config](errInvalid, "WithC", "config", nil), "invalid option: WithC: nil config"},
		"pointer":           {NotNil(errInvalid, "WithC", "config", &config{}), ""},
	} {
		got := ""
		if c.err != nil {
			got = c.err.Error()
			if !errors.Is(c.err, errInvalid) {
				t.Errorf("%s: %v does not wrap the package's error", name, c.err)
			}
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}
