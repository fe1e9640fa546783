package readme

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/actorsharding"
)

// goBlock is one Go code block of a Markdown page.
type goBlock struct {
	line  int // of the opening fence, 1-based
	lines []string
}

// goBlocks returns the Go code blocks of the page named name.
func goBlocks(t *testing.T, name, page string) []goBlock {
	t.Helper()
	var blocks []goBlock
	var cur *goBlock
	for i, l := range strings.Split(page, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(l) == "```go":
			cur = &goBlock{line: i + 1}
		case cur != nil && strings.TrimSpace(l) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		}
	}
	if cur != nil {
		t.Fatalf("%s: the Go block at line %d does not end", name, cur.line)
	}
	return blocks
}

// normalized drops the indentation and trailing blanks of each line: a
// page's block may sit at another depth than its code.
func normalized(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimSpace(l)
	}
	return out
}

// contains reports whether block is a run of consecutive lines of file.
func contains(file, block []string) bool {
	for start := 0; start+len(block) <= len(file); start++ {
		match := true
		for i := range block {
			if file[start+i] != block[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// documents are the pages whose Go blocks must be compiled code: the
// README and every page under docs/.
func documents(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, pages...)
}

// TestEveryGoBlockOfTheREADMEIsCompiledCode: each Go block of the README
// and of the docs pages is a run of lines of this package's files or of
// an example's main.go, all of which `go vet ./...` and this test build.
func TestEveryGoBlockOfTheREADMEIsCompiledCode(t *testing.T) {
	sources := map[string][]string{}
	for _, pattern := range []string{"*.go", "../*/main.go"} {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			sources[p] = normalized(strings.Split(string(data), "\n"))
		}
	}
	for _, doc := range documents(t) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlocks(t, doc, string(text))
		if doc == "../../README.md" && len(blocks) == 0 {
			t.Fatal("README has no Go block")
		}
		for _, b := range blocks {
			want := normalized(b.lines)
			found := false
			for _, src := range sources {
				if contains(src, want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s line %d: the Go block is in no file of examples/readme nor any example's main.go; put it there as compiling code and paste it back:\n%s",
					strings.TrimPrefix(doc, "../../"), b.line, strings.Join(b.lines, "\n"))
			}
		}
	}
}

// newNode is what a test of a snippet that starts a node needs: a
// context bounded by timeout and an actor system, both ended with the
// test. It skips the test under -race (see raceEnabled).
func newNode(t *testing.T, timeout time.Duration) (context.Context, *actor.ActorSystem) {
	t.Helper()
	if raceEnabled {
		t.Skip("starts proto.actor remotes, which race in proto.actor under -race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	return ctx, system
}

// joinedNode is newNode joined to an in-process cluster; the node leaves
// with the end of the test.
func joinedNode(t *testing.T, timeout time.Duration) (context.Context, *actor.ActorSystem, *actorsharding.Sharding) {
	t.Helper()
	ctx, system := newNode(t, timeout)
	sharding, err := actorsharding.Join(ctx, system)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sharding.Leave(ctx) })
	return ctx, system, sharding
}
