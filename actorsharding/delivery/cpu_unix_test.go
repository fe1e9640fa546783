//go:build unix

package delivery_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process used so far, user and system;
// false where it cannot be read.
func processCPU() (time.Duration, bool) {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0, false
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano()), true
}
