// Package testkit is the multi-node test harness of protoshard: several
// actor systems with remoting on loopback in one process, joined through a
// membership Backend (in-process registry, or a real Consul agent), plus an
// activation Ledger that checks the at-most-one-incarnation invariant of
// singletons and entities as it happens.
//
// Starting several proto.actor remotes in one process cannot run under the
// race detector: every Remote.Start replaces grpc's global logger while the
// other remotes' grpc goroutines read it. NewCluster therefore skips the
// test when built with -race; the Ledger and other pure helpers work there.
// A test that must run under -race with several nodes runs each node in a
// process of its own: StartProcess runs the test binary again as a child,
// whose ChildProcess.Cluster holds its one node, and fails the test when a
// child's race detector reports a race.
package testkit
