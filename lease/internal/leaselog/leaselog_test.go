package leaselog

import (
	"io"
	"log/slog"
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
