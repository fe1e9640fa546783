//go:build !unix

package testsupport

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
