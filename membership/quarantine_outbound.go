package membership

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/deadletters"
)

// This file is the quarantine's outbound side: nothing this node sends
// reaches a quarantined address, and proto.actor's remote never waits on
// one.
//
// The remote opens an endpoint to an address on demand, and its endpoint
// writer tries to connect five times, two seconds apart, before it gives
// up: ten seconds during which the writer does nothing else and the
// remote's graceful shutdown waits for it. Each attempt dials a new gRPC
// connection and only the last one is closed; the others redial the
// address for ever. So:
//   - sends to a quarantined address are dropped before they reach the
//     remote (fencedProcess);
//   - an endpoint the remote opens by itself (to pass on the Terminated of
//     an actor there, say) is connected at once to a sink that drops what
//     it is given and ends after sinkLifetime (sinkStream);
//   - a connection whose stream could not be opened (a dead node, not yet
//     removed) is closed (clientInterceptor);
//   - a node that says it shuts its remote down is quarantined at once, as
//     at its removal, which this node may learn of only later
//     (dialedStream).

// sinkLifetime is how long an endpoint to a quarantined address lives: long
// enough that proto.actor has announced it connected before it ends (else
// the announcement would open it again), short enough that a process that
// starts again at the address is soon reached.
const sinkLifetime = time.Second

// clientInterceptor wraps every stream proto.actor's remote opens to
// another node.
func (q *Quarantine) clientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if q.addressBlocked(cc.Target()) {
		// The sink never uses the connection.
		_ = cc.Close()
		return newSinkStream(ctx, q, cc.Target()), nil
	}
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		_ = cc.Close()
		return nil, err
	}
	return &dialedStream{ClientStream: s, q: q, address: cc.Target()}, nil
}

// dialedStream is one outbound connection. proto.actor's
// Remote.Shutdown(true) sends a DisconnectRequest to every node connected
// to it; a node calls it when it leaves for good.
type dialedStream struct {
	grpc.ClientStream
	q       *Quarantine
	address string
}

func (s *dialedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if msg, ok := m.(*remote.RemoteMessage); ok && err == nil && msg.GetDisconnectRequest() != nil {
		s.q.blockAddress(s.address)
	}
	return err
}

// sinkStream stands for a stream to a quarantined address: it answers the
// endpoint writer's ConnectRequest, reports every message the writer gives
// it as dropped, and ends after sinkLifetime, or when the writer closes it.
type sinkStream struct {
	ctx      context.Context
	q        *Quarantine
	address  string
	answered atomic.Bool
	closed   chan struct{}
	close    sync.Once
}

func newSinkStream(ctx context.Context, q *Quarantine, address string) *sinkStream {
	return &sinkStream{ctx: ctx, q: q, address: address, closed: make(chan struct{})}
}

func (s *sinkStream) Header() (metadata.MD, error) { return nil, nil }
func (s *sinkStream) Trailer() metadata.MD         { return nil }
func (s *sinkStream) Context() context.Context     { return s.ctx }

func (s *sinkStream) CloseSend() error {
	s.close.Do(func() { close(s.closed) })
	return nil
}

func (s *sinkStream) SendMsg(m any) error {
	if batch := m.(*remote.RemoteMessage).GetMessageBatch(); batch != nil {
		s.q.dropBatch(batch)
	}
	return nil
}

func (s *sinkStream) RecvMsg(m any) error {
	if !s.answered.Swap(true) {
		m.(*remote.RemoteMessage).MessageType = &remote.RemoteMessage_ConnectResponse{ConnectResponse: &remote.ConnectResponse{}}
		return nil
	}
	t := time.NewTimer(sinkLifetime)
	defer t.Stop()
	select {
	case <-s.closed:
		return io.EOF
	case <-t.C:
		return status.Errorf(codes.Unavailable, "protoshard quarantine: %s is a removed member's address", s.address)
	}
}

// dropBatch reports what the remote would have sent to the quarantined
// address.
func (q *Quarantine) dropBatch(batch *remote.MessageBatch) {
	for _, env := range batch.GetEnvelopes() {
		var target, sender *actor.PID
		if i := int(env.GetTarget()); i < len(batch.GetTargets()) {
			target = batch.GetTargets()[i]
		}
		if i := int(env.GetSender()) - 1; i >= 0 && i < len(batch.GetSenders()) {
			sender = batch.GetSenders()[i]
		}
		var msg any
		if i := int(env.GetTypeId()); i < len(batch.GetTypeNames()) {
			msg = batch.GetTypeNames()[i] // what it was, if it cannot be decoded
			if m, err := remote.Deserialize(env.GetMessageData(), batch.GetTypeNames()[i], env.GetSerializerId()); err == nil {
				msg = m
			}
		}
		q.drop(target, msg, sender)
	}
}

// drop reports msg, for target at a quarantined address, as dropped.
func (q *Quarantine) drop(target *actor.PID, msg any, sender *actor.PID) {
	switch m := msg.(type) {
	case *actor.Watch:
		// As the remote's endpoint watcher answers a watch of an address
		// whose endpoint terminated.
		if ref, ok := q.system.ProcessRegistry.GetLocal(m.Watcher.GetId()); ok {
			ref.SendSystemMessage(m.Watcher, &actor.Terminated{Who: target, Why: actor.TerminatedReason_AddressTerminated})
		}
	case *actor.Unwatch:
	case actor.SystemMessage, *actor.DeadLetterResponse:
		// Protocol traffic to a removed member's actors (the Terminated of
		// an actor it watched, the answer to its own dead letter):
		// proto.actor's reasonless dead letter, as its remote publishes for
		// an endpoint it cannot reach, without a warning each.
		q.system.EventStream.Publish(&actor.DeadLetterEvent{PID: target, Message: msg, Sender: sender})
	default:
		deadletters.PublishError(q.system, target, msg, sender,
			fmt.Errorf("quarantine: %s is the address of a member removed from the cluster: %w", target.GetAddress(), deadletter.ErrMemberRemoved))
	}
}

// install puts the quarantine in front of the remote in system's process
// registry (see fencedProcess). The remote's resolver answers every remote
// PID, so the quarantine's must come first; the Cluster installs it before
// it joins, when no remote traffic resolves PIDs yet. Quarantines end
// after retention at the earliest (see Quarantine).
func (q *Quarantine) install(system *actor.ActorSystem, retention time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.system != nil {
		return
	}
	q.system = system
	q.keepFor(retention)
	pr := system.ProcessRegistry
	pr.RemoteHandlers = append([]actor.AddressResolver{q.resolve}, pr.RemoteHandlers...)
}

// resolve wraps the process the resolvers after it (the remote's) give for
// pid. A PID keeps the process it was resolved to, so the wrapper checks
// the quarantine at every send.
func (q *Quarantine) resolve(pid *actor.PID) (actor.Process, bool) {
	for _, next := range q.system.ProcessRegistry.RemoteHandlers[1:] {
		if p, ok := next(pid); ok {
			return &fencedProcess{q: q, next: p}, true
		}
	}
	return nil, false
}

// fencedProcess sends to a remote PID unless its address is quarantined.
type fencedProcess struct {
	q    *Quarantine
	next actor.Process
}

func (p *fencedProcess) SendUserMessage(pid *actor.PID, message any) {
	if !p.q.addressBlocked(pid.GetAddress()) {
		p.next.SendUserMessage(pid, message)
		return
	}
	msg, sender := message, (*actor.PID)(nil)
	if env, ok := message.(*actor.MessageEnvelope); ok && env != nil {
		msg, sender = env.Message, env.Sender
	}
	p.q.drop(pid, msg, sender)
}

func (p *fencedProcess) SendSystemMessage(pid *actor.PID, message any) {
	if !p.q.addressBlocked(pid.GetAddress()) {
		p.next.SendSystemMessage(pid, message)
		return
	}
	p.q.drop(pid, message, nil)
}

func (p *fencedProcess) Stop(pid *actor.PID) {
	if !p.q.addressBlocked(pid.GetAddress()) {
		p.next.Stop(pid)
		return
	}
	p.SendSystemMessage(pid, &actor.Stop{})
}
