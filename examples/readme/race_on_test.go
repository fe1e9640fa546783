//go:build race

package readme

// raceEnabled: the tests that start proto.actor remotes are skipped under
// -race: every Remote.Start replaces grpc's global logger, and
// Remote.Shutdown writes a flag that the endpoint manager reads unguarded.
const raceEnabled = true
