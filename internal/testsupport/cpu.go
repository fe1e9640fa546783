package testsupport

import (
	"testing"
	"time"
)

// AssertNotSpinning fails t if the process keeps a core busy while it
// should be idle: it measures the CPU time the process uses over window
// and fails if that is more than half of it. A mailbox that spins (as
// proto.actor's does on a nil message) uses a whole core, as long as it
// runs. Where the platform cannot tell the process's CPU time, the check is
// skipped.
func AssertNotSpinning(t testing.TB, window time.Duration) {
	t.Helper()
	before, ok := processCPU()
	if !ok {
		t.Log("testkit: no process CPU time on this platform; spin check skipped")
		return
	}
	time.Sleep(window)
	after, _ := processCPU()
	if used := after - before; used > window/2 {
		t.Fatalf("the process used %v of CPU in %v while idle: something spins", used, window)
	}
}

// ProcessCPU is the user and system CPU time the process has used so far;
// false where the platform cannot tell.
func ProcessCPU() (time.Duration, bool) { return processCPU() }
