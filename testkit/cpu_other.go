//go:build !unix

package testkit

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
