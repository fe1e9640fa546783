package membership

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/protoshard/protoshard/internal/expiring"
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
// A quarantine that nothing lifts ends after an hour (Akka's
// remove-quarantined-association-after), or ten times the provider's
// removal bound if that is longer (see removedRetention), and never while a
// connection from the quarantined actor system is still open. A member
// that was removed has, by then, fenced itself (it stopped acting as a
// member one failure detection timeout after its last confirmed
// registration, and stays so until it joins again, which lifts the
// quarantine), or died. What a paused process had queued for this node
// before its pause travels on the connection it had open, which keeps the
// quarantine; if that connection ends meanwhile, proto.actor drops what
// was queued on it. An address is dialled again on demand once its
// quarantine ends, as any address no member has used.
//
// One Quarantine serves one node (one remote and its Cluster).
type Quarantine struct {
	mu        sync.RWMutex
	systems   expiring.Set[struct{}] // actor system IDs whose messages are refused
	addresses expiring.Set[struct{}] // addresses this node does not dial
	// inbound counts the open inbound connections by actor system ID: a
	// quarantined system with one open stays quarantined.
	inbound map[string]int
	now     func() time.Time
	system  *actor.ActorSystem
	// config is the remote config RemoteOption went into last, for
	// checkInstalled.
	config *remote.Config
}

// ErrNoQuarantine is what actorsharding.New refuses a node with whose
// remote is not fenced against removed members (see Quarantine).
var ErrNoQuarantine = errors.New("membership: the node's remote has no quarantine against removed members " +
	"(create q := membership.NewQuarantine(), pass q.RemoteOption() last to remote.Configure, " +
	"and set membership.Config.Quarantine to q; actorsharding.Join does all three)")

// NewQuarantine returns a Quarantine that blocks nothing yet.
func NewQuarantine() *Quarantine {
	q := &Quarantine{inbound: map[string]int{}, now: time.Now}
	q.keepFor(quarantineRetention)
	return q
}

// keepFor makes quarantines that nothing lifts last retention at least,
// as long as nothing was quarantined yet.
func (q *Quarantine) keepFor(retention time.Duration) {
	q.systems = expiring.NewSet[struct{}](retention, q.connectedLocked)
	q.addresses = expiring.NewSet[struct{}](retention, nil)
}

// connectedLocked reports whether the actor system id has a connection
// open to this node.
func (q *Quarantine) connectedLocked(id string) bool { return q.inbound[id] > 0 }

// connected notes a connection from the actor system id, open (delta 1)
// or ended (-1).
func (q *Quarantine) connected(id string, delta int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := q.inbound[id] + delta; n > 0 {
		q.inbound[id] = n
	} else {
		delete(q.inbound, id)
	}
}

// RemoteOption installs the quarantine in a proto.actor remote: pass it to
// remote.Configure before the remote starts, after the other options. It
// adds gRPC interceptors and keeps the remote's other server and dial
// options; remote.WithServerOptions and WithDialOptions replace the
// options set before them, the quarantine's included.
func (q *Quarantine) RemoteOption() remote.ConfigOption {
	return func(c *remote.Config) {
		c.ServerOptions = append(c.ServerOptions, serverOption{grpc.ChainStreamInterceptor(q.serverInterceptor), q})
		c.DialOptions = append(c.DialOptions, dialOption{grpc.WithChainStreamInterceptor(q.clientInterceptor), q})
		q.mu.Lock()
		q.config = c
		q.mu.Unlock()
	}
}

// serverOption and dialOption are the quarantine's gRPC options, told
// apart from the others in a remote config by checkInstalled.
type serverOption struct {
	grpc.ServerOption
	q *Quarantine
}

type dialOption struct {
	grpc.DialOption
	q *Quarantine
}

// checkInstalled tells whether RemoteOption went into a remote config and
// its gRPC options are still there. It cannot see which actor system's
// remote the config went to.
func (q *Quarantine) checkInstalled() error {
	q.mu.RLock()
	c := q.config
	q.mu.RUnlock()
	if c == nil {
		return fmt.Errorf("%w: the quarantine's RemoteOption was not passed to remote.Configure", ErrNoQuarantine)
	}
	server := slices.ContainsFunc(c.ServerOptions, func(o grpc.ServerOption) bool {
		so, ok := o.(serverOption)
		return ok && so.q == q
	})
	dial := slices.ContainsFunc(c.DialOptions, func(o grpc.DialOption) bool {
		do, ok := o.(dialOption)
		return ok && do.q == q
	})
	if !server || !dial {
		return fmt.Errorf("%w: a remote option after the quarantine's RemoteOption replaced the gRPC server or dial options; pass RemoteOption last", ErrNoQuarantine)
	}
	return nil
}

// removed quarantines m: a crash (graceful false) blocks its actor system
// and its address; a graceful leave only its address (the member has shut
// down; there is nothing to dial).
func (q *Quarantine) removed(m Member, graceful bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.pruneLocked()
	if !graceful && m.SystemID != "" {
		q.systems.Put(m.SystemID, struct{}{}, now)
	}
	if m.Address != "" {
		q.addresses.Put(m.Address, struct{}{}, now)
	}
}

// blockAddress quarantines address (its node announced it shuts down).
func (q *Quarantine) blockAddress(address string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.system != nil { // a quarantine no Cluster installed blocks nothing
		q.addresses.Put(address, struct{}{}, q.pruneLocked())
	}
}

// pruneLocked ends the quarantines past their window (see Quarantine) and
// returns the time it did so at: each write prunes both sets.
func (q *Quarantine) pruneLocked() time.Time {
	now := q.now()
	q.systems.Prune(now)
	q.addresses.Prune(now)
	return now
}

// up lifts what blocks m, a live member.
func (q *Quarantine) up(m Member) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.systems.Delete(m.SystemID)
	q.addresses.Delete(m.Address)
}

// systemBlocked reports whether messages from the actor system id are
// refused.
func (q *Quarantine) systemBlocked(id string) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.systems.Has(id)
}

// addressBlocked reports whether this node refuses to dial address.
func (q *Quarantine) addressBlocked(address string) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.addresses.Has(address)
}

// serverInterceptor wraps proto.actor's inbound stream: it learns the
// connecting actor system from its ConnectRequest and fails the stream on
// any message once that system is quarantined. proto.actor reads the
// stream only on the handler's goroutine, so the stream has ended for it
// once the handler returned.
func (q *Quarantine) serverInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s := &quarantinedStream{ServerStream: ss, q: q}
	defer s.from("")
	return handler(srv, s)
}

// quarantinedStream is one inbound connection. RecvMsg runs on the one
// goroutine that reads the stream, so systemID needs no lock.
type quarantinedStream struct {
	grpc.ServerStream
	q        *Quarantine
	systemID string
}

// from notes that the stream comes from the actor system id ("": it
// ended).
func (s *quarantinedStream) from(id string) {
	if id == s.systemID {
		return
	}
	if s.systemID != "" {
		s.q.connected(s.systemID, -1)
	}
	if id != "" {
		s.q.connected(id, 1)
	}
	s.systemID = id
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
		s.from(sc.GetSystemId())
	}
	if s.systemID != "" && s.q.systemBlocked(s.systemID) {
		return status.Errorf(codes.PermissionDenied, "protoshard quarantine: actor system %s belongs to a removed member", s.systemID)
	}
	return nil
}
