package consulkey

import (
	"errors"
	"testing"
)

func TestPrefix(t *testing.T) {
	for name, want := range map[string]string{
		"app-a":      "protoshard/app-a/",
		"a/b":        "protoshard/a%2Fb/",
		"..":         "protoshard/%2E./",
		"protoshard": "protoshard/protoshard/",
	} {
		if got := Prefix(name); got != want {
			t.Errorf("Prefix(%q) = %q, want %q", name, got, want)
		}
		if got := LeasePrefix(name); got != want+"lease/" {
			t.Errorf("LeasePrefix(%q) = %q, want %q", name, got, want+"lease/")
		}
		if err := CheckClusterName(name); err != nil {
			t.Errorf("CheckClusterName(%q): %v", name, err)
		}
	}
	if err := CheckClusterName(""); !errors.Is(err, ErrNoClusterName) {
		t.Errorf("CheckClusterName(\"\") = %v, want ErrNoClusterName", err)
	}
}
