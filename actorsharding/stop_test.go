package actorsharding_test

import (
	"bytes"
	"context"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/protoshard/protoshard/testkit"
)

// Start and stop a three-node cluster with regions and traffic five times,
// each time gracefully or by a crash and the test's clean-up: each graceful
// node stop takes well under five seconds, and no goroutine is left behind.
//
// Before, the last node's stopping coordinator told the regions of the
// nodes that had left that it terminated; the remote opened an endpoint to
// each of their addresses for it, the quarantine refused the connection,
// and proto.actor's endpoint writer retried five times, two seconds apart
// (its shutdown waited those ten seconds), dialling a new gRPC connection
// each time and closing only the last: four per address were left
// redialling for ever.
func TestStartStopLeavesNothingBehind(t *testing.T) {
	skipUnderRace(t)
	baseline := runtime.NumGoroutine()
	const cycles, slack, maxStop = 5, 5, 5 * time.Second
	for cycle := 0; cycle < cycles; cycle++ {
		graceful := cycle%2 == 0
		t.Run(map[bool]string{true: "graceful", false: "crash"}[graceful], func(t *testing.T) {
			w := newLocalWorld(t)
			nodes := []*testkit.Node{w.startNode(false), w.startNode(false), w.startNode(false)}
			w.cluster.WaitConverged(t, 30*time.Second)
			w.waitRegistered(len(nodes))
			for _, id := range entityIDs(20) {
				askEventually(t, nodes[cycle%len(nodes)], w.region(nodes[cycle%len(nodes)]), id, 1)
			}
			if !graceful {
				nodes[1].Crash() // the others stop at the test's clean-up
				return
			}
			for i := len(nodes) - 1; i >= 0; i-- {
				start := time.Now()
				if err := nodes[i].Leave(context.Background()); err != nil {
					t.Fatalf("%s: %v", nodes[i].Name, err)
				}
				if took := time.Since(start); took > maxStop {
					t.Errorf("%s took %v to stop gracefully, more than %v", nodes[i].Name, took, maxStop)
				}
			}
		})
	}
	// Connection attempts to a crashed node end after proto.actor's
	// retries (ten seconds); what is left after that is a leak.
	testkit.WaitFor(t, 60*time.Second, func() bool { return runtime.NumGoroutine() <= baseline+slack },
		"goroutines to return to %d (+%d) after %d start/stop cycles; %s", baseline, slack, cycles, testkit.Lazy(func() any {
			var b bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			return b.String()
		}))
}
