//go:build !race

package membership_test

// raceEnabled: tests that start several proto.actor remotes are skipped under
// -race, since every Remote.Start replaces grpc's global logger.
const raceEnabled = false
