// Package pidkey is the one way protoshard names a PID as a map key: by
// its address and id, never by the pointer (PIDs are copied across the
// wire and carry a cached process) and never with its request id.
package pidkey

import "github.com/asynkron/protoactor-go/actor"

// Of returns the key of pid, "" for nil. Two PIDs of the same actor have
// the same key.
func Of(pid *actor.PID) string {
	if pid == nil {
		return ""
	}
	return pid.GetAddress() + "/" + pid.GetId()
}
