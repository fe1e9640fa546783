package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/protoshard/protoshard/internal/raceflag"
)

// TestRun checks the story the example tells: the overdraft is refused,
// and the node started after the first recovers the balance, under a
// higher token.
func TestRun(t *testing.T) {
	if raceflag.Enabled {
		t.Skip("starts proto.actor remotes, which race on grpc's global logger; runs in the non-race pass")
	}
	var out, logs bytes.Buffer
	if err := run(&out, &logs); err != nil {
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	want := "+100: balance 100\n-30: balance 70\n-500: balance 70\n+5: balance 75\nstored: revision 5, token 2\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if strings.Contains(logs.String(), "durable state") {
		t.Errorf("durable state logged:\n%s", logs.String())
	}
}
