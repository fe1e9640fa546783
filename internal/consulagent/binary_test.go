package consulagent

import (
	"os"
	"path/filepath"
	"testing"
)

// writeExe writes a fake executable; Binary only looks, it never runs it.
func writeExe(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestBinaryOrder(t *testing.T) {
	dir := t.TempDir()
	explicit := filepath.Join(dir, "explicit", "consul")
	cached := filepath.Join(dir, "cache", "bin", "consul-"+Version)
	onPath := filepath.Join(dir, "path", "consul")
	writeExe(t, explicit)
	writeExe(t, cached)
	writeExe(t, onPath)

	t.Setenv("PATH", filepath.Dir(onPath))
	t.Setenv("PROTOSHARD_CACHE", filepath.Join(dir, "cache"))
	t.Setenv("PROTOSHARD_CONSUL", explicit)
	if got, err := Binary(); err != nil || got != explicit {
		t.Fatalf("with PROTOSHARD_CONSUL: %q, %v", got, err)
	}

	t.Setenv("PROTOSHARD_CONSUL", "")
	if got, err := Binary(); err != nil || got != cached {
		t.Fatalf("with the cache: %q, %v", got, err)
	}

	t.Setenv("PROTOSHARD_CACHE", filepath.Join(dir, "empty"))
	if got, err := Binary(); err != nil || got != onPath {
		t.Fatalf("on PATH: %q, %v", got, err)
	}

	t.Setenv("PATH", filepath.Join(dir, "nowhere"))
	if got, err := Binary(); err == nil {
		t.Fatalf("no binary anywhere, got %q", got)
	}

	t.Setenv("PROTOSHARD_CONSUL", filepath.Join(dir, "missing"))
	if got, err := Binary(); err == nil {
		t.Fatalf("a PROTOSHARD_CONSUL that does not exist must be an error, got %q", got)
	}
}

func TestCacheDirDefaults(t *testing.T) {
	t.Setenv("PROTOSHARD_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if got := cacheDir(); got != "/xdg/protoshard" {
		t.Fatalf("with XDG_CACHE_HOME: %q", got)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := cacheDir(); got != "/home/u/.cache/protoshard" {
		t.Fatalf("with HOME: %q", got)
	}
}
