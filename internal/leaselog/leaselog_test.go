package leaselog

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	configured := slog.New(slog.NewTextHandler(io.Discard, nil))
	given := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name              string
		configured, given *slog.Logger
		want              *slog.Logger
	}{
		{"configured wins", configured, given, configured},
		{"given without configured", nil, given, given},
		{"default without either", nil, nil, slog.Default()},
	} {
		if got := Choose(tc.configured, tc.given); got != tc.want {
			t.Errorf("%s: got %p, want %p", tc.name, got, tc.want)
		}
	}
}

// Use hands a lease its holder's logger unless its provider configured
// one, and keeps the lease's attributes either way.
func TestLogUse(t *testing.T) {
	var configured, given strings.Builder
	text := func(b *strings.Builder) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

	l := New(nil, "test-lease", "name", "owner")
	l.Use(text(&given))
	l.Info("held")
	if !strings.Contains(given.String(), "msg=held component=test-lease lease=name owner=owner") {
		t.Fatalf("the holder's logger got %q", given.String())
	}

	given.Reset()
	l = New(text(&configured), "test-lease", "name", "owner")
	l.Use(text(&given))
	l.Info("held")
	if given.Len() != 0 || !strings.Contains(configured.String(), "msg=held component=test-lease") {
		t.Fatalf("with a configured logger: configured %q, holder's %q", configured.String(), given.String())
	}
}
