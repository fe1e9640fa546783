//go:build !unix

package delivery_test

import "time"

// processCPU: not read on this platform.
func processCPU() (time.Duration, bool) { return 0, false }
