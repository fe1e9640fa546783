package membership

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Quarantine is the remote-layer fence of a node against removed members,
// as Akka's remoting quarantines the UID of a removed incarnation: once a
// member is removed without leaving, nothing its actor system sends is
// processed here, and this node no longer dials its address. A member that
// was removed may still run (it was paused, or cut off); what it sends
// after its removal (a stale coordinator's commands, a region's buffered
// messages forwarded late) would otherwise reach actors that have moved on.
//
// It works on proto.actor's gRPC transport and process registry: the
// remote passes every connection through it (see RemoteOption), the Cluster
// (Config Quarantine) tells it who was removed and puts it in front of the
// remote in the actor system's process registry. A connection from a
// quarantined actor system is refused, and one already open is closed at
// its next message, which is dropped. What this node sends to a
// quarantined address is dropped here with a dead-letter event (a Watch is
// answered with Terminated at once), and nothing holds the remote up on it
// (see quarantine_outbound.go). An endpoint already open is left to end by
// itself, so that what was on its way to a node that is only paused
// reaches it, and it drops that with a reason once it resumes (a dead
// node's connection ends at once). A node that announces the shutdown of
// its remote (after it left) is quarantined at once, as at its removal.
// proto.actor's own BlockList is not used: its endpoint reader answers a
// blocked system "blocked" and goes on reading its messages.
//
// A removed node that joins again does so as a new member of the same
// actor system: its quarantine is lifted when the new member is up, since
// it has processed its removal before it re-joins. Addresses are lifted
// when any member is up at them again (a process restarted on the same
// host:port).
//
// One Quarantine serves one node (one remote and its Cluster).
type Quarantine struct {
	mu        sync.RWMutex
	systems   map[string]bool // actor system IDs whose messages are refused
	addresses map[string]bool // addresses this node does not dial
	system    *actor.ActorSystem
}

// NewQuarantine returns a Quarantine that blocks nothing yet.
func NewQuarantine() *Quarantine {
	return &Quarantine{systems: map[string]bool{}, addresses: map[string]bool{}}
}

// RemoteOption installs the quarantine in a proto.actor remote: pass it to
// remote.Configure before the remote starts. It adds gRPC interceptors and
// keeps the remote's other options.
func (q *Quarantine) RemoteOption() remote.ConfigOption {
	return func(c *remote.Config) {
		c.ServerOptions = append(c.ServerOptions, grpc.ChainStreamInterceptor(q.serverInterceptor))
		c.DialOptions = append(c.DialOptions, grpc.WithChainStreamInterceptor(q.clientInterceptor))
	}
}

// removed quarantines m: a crash (graceful false) blocks its actor system
// and its address; a graceful leave only its address (the member has shut
// down; there is nothing to dial).
func (q *Quarantine) removed(m Member, graceful bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !graceful && m.SystemID != "" {
		q.systems[m.SystemID] = true
	}
	if m.Address != "" {
		q.addresses[m.Address] = true
	}
}

// up lifts what blocks m, a live member.
func (q *Quarantine) up(m Member) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.systems, m.SystemID)
	delete(q.addresses, m.Address)
}

// SystemBlocked reports whether messages from the actor system id are
// refused.
func (q *Quarantine) SystemBlocked(id string) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.systems[id]
}

// AddressBlocked reports whether this node refuses to dial address.
func (q *Quarantine) AddressBlocked(address string) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.addresses[address]
}

// serverInterceptor wraps proto.actor's inbound stream: it learns the
// connecting actor system from its ConnectRequest and fails the stream on
// any message once that system is quarantined.
func (q *Quarantine) serverInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &quarantinedStream{ServerStream: ss, q: q})
}

// quarantinedStream is one inbound connection. RecvMsg runs on the one
// goroutine that reads the stream, so systemID needs no lock.
type quarantinedStream struct {
	grpc.ServerStream
	q        *Quarantine
	systemID string
}

func (s *quarantinedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	msg, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if sc := msg.GetConnectRequest().GetServerConnection(); sc != nil {
		s.systemID = sc.GetSystemId()
	}
	if s.systemID != "" && s.q.SystemBlocked(s.systemID) {
		return status.Errorf(codes.PermissionDenied, "protoshard quarantine: actor system %s belongs to a removed member", s.systemID)
	}
	return nil
}
