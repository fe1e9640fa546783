package leaselog

import (
	"log/slog"
	"strings"
	"testing"
)

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
