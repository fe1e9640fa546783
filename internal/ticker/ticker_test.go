package ticker_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/internal/ticker"
)

type tick struct{}

// Ticks arrive until cancel, none after it; cancels that meet a tick are
// no data race (run with -race).
func TestSendRepeatedly(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var ticks atomic.Int64
	pid := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(tick); ok {
			ticks.Add(1)
		}
	}))
	cancel := ticker.SendRepeatedly(system.Root, 0, time.Millisecond, pid, tick{})
	deadline := time.Now().Add(10 * time.Second)
	for ticks.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d ticks in 10s at 1ms, want 5", ticks.Load())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	cancel()
	time.Sleep(20 * time.Millisecond) // a tick sent before cancel may still be in the mailbox
	after := ticks.Load()
	time.Sleep(50 * time.Millisecond)
	if got := ticks.Load(); got != after {
		t.Fatalf("%d ticks after cancel, want none", got-after)
	}

	// Cancel as the timers fire, many times over.
	for range 200 {
		c := ticker.SendRepeatedly(system.Root, 0, time.Microsecond, pid, tick{})
		time.Sleep(time.Duration(time.Now().UnixNano()%50) * time.Microsecond)
		c()
	}
}

// No library, command or example code uses proto.actor's
// TimerScheduler.SendRepeatedly: its cancel races with a tick that fires
// meanwhile, which -race reports at random in whatever test stops the
// actor at that moment.
func TestNoSchedulerSendRepeatedly(t *testing.T) {
	const schedulerPath = `"github.com/asynkron/protoactor-go/scheduler"`
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "../.." && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		if !slices.ContainsFunc(f.Imports, func(s *ast.ImportSpec) bool { return s.Path.Value == schedulerPath }) {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "SendRepeatedly" && sel.Sel.Name != "RequestRepeatedly") {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "ticker" {
				return true
			}
			t.Errorf("%s: scheduler's %s; use ticker.SendRepeatedly or a SendOnce re-armed on each tick", fset.Position(call.Pos()), sel.Sel.Name)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
