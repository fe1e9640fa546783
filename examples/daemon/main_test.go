package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/raceflag"
)

// TestRun runs the example: three workers, then five.
func TestRun(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("starts a proto.actor remote, which races on grpc's global logger under -race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var out bytes.Buffer
	if err := run(ctx, system, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "running: [0 1 2]\nrunning: [0 1 2 3 4]\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}
