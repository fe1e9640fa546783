//go:build !race

// Package raceflag tells whether the binary was built with -race: several
// proto.actor remotes in one process race on grpc's global logger, so the
// tests that start them skip under the race detector.
package raceflag

// Enabled reports whether the binary was built with -race.
const Enabled = false
