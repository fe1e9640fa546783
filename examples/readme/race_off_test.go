//go:build !race

package readme

// raceEnabled: see race_on_test.go.
const raceEnabled = false
