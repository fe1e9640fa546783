// Package testsupport holds what this module's own tests use beyond
// package testkit: a membership backend whose nodes can be paused as by
// SIGSTOP (PausableBackend), recorded log lines to assert on (Logs, with
// testkit.WithLogHandler), and a check that nothing spins
// (AssertNotSpinning).
package testsupport
