package pathseg

import (
	"net/url"
	"testing"
)

func TestEscape(t *testing.T) {
	cases := map[string]string{
		"plain": "plain",
		"a/b":   "a%2Fb",
		".":     "%2E",
		"..":    "%2E.",
		".hid":  "%2Ehid",
		"50%":   "50%25",
		"x y ü": "x%20y%20%C3%BC",
		"a.b":   "a.b",
		"%2E":   "%252E",
		"":      "",
	}
	for in, want := range cases {
		got := Escape(in)
		if got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if back, err := url.PathUnescape(got); err != nil || back != in {
			t.Errorf("PathUnescape(%q) = %q, %v; want %q", got, back, err, in)
		}
	}
}
