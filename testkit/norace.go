//go:build !race

package testkit

// RaceEnabled reports whether the binary was built with -race.
const RaceEnabled = false
