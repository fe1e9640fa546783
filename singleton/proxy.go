package singleton

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/msgbuffer"
	"github.com/protoshard/protoshard/internal/ticker"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// StartProxy spawns a ClusterSingletonProxy for the singleton whose
// managers are named managerName. Send it any message: it forwards to the
// singleton on the oldest member (of the role), preserving the sender, and
// buffers while the singleton is unknown (a hand-over, or start-up). Its
// WithSingletonName and WithRole must match the managers'. An option with
// a value it does not accept fails with ErrInvalidOption.
func StartProxy(system *actor.ActorSystem, cluster *membership.Cluster, managerName string, opts ...Option) (*actor.PID, error) {
	if managerName == "" {
		return nil, errors.New("singleton: proxy needs the manager name")
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("singleton: proxy of %q: %w", managerName, err)
	}
	settings := o.proxy.withDefaults()
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &proxy{cluster: cluster, managerName: managerName, settings: settings,
			buffer: msgbuffer.New[struct{}, bufferedMessage](settings.BufferSize)}
	}, guard.WithMailbox()))
	return pid, nil
}

// proxy is Akka's ClusterSingletonProxy.
type proxy struct {
	cluster     *membership.Cluster
	managerName string
	settings    proxySettings

	tracker     *oldestTracker
	singleton   *actor.PID
	singletonOf string                                      // member id that runs singleton
	buffer      msgbuffer.Buffer[struct{}, bufferedMessage] // one queue: a single key
	cancelTick  scheduler.CancelFunc
}

type bufferedMessage struct {
	message any
	sender  *actor.PID
}

// identifyTick re-arms the identification while the singleton is unknown.
type identifyTick struct{}

func (p *proxy) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		p.cluster.Subscribe(ctx.Self())
		p.cancelTick = ticker.SendRepeatedly(ctx,
			p.settings.SingletonIdentificationInterval, p.settings.SingletonIdentificationInterval, ctx.Self(), identifyTick{})
	case *actor.Stopping:
		p.cluster.Unsubscribe(ctx.Self())
		if p.cancelTick != nil {
			p.cancelTick()
		}
		for _, b := range p.buffer.Take(struct{}{}) {
			deadletters.PublishError(ctx.ActorSystem(), nil, b.message, b.sender, fmt.Errorf("singleton proxy stopped with the message still buffered: %w", deadletter.ErrShuttingDown))
		}
	case *actor.Stopped, *actor.Restarting:
	case *membership.CurrentClusterState:
		p.tracker = newOldestTracker(p.settings.Role, msg)
		p.forget(ctx)
		p.identify(ctx)
	case membership.MemberUp, membership.MemberLeft, membership.MemberRemoved:
		if p.tracker != nil && p.tracker.apply(msg) {
			p.forget(ctx)
			p.identify(ctx)
		}
	case identifyTick:
		if p.singleton == nil {
			p.identify(ctx)
		}
	case *messages.SingletonIdentity:
		p.onIdentity(ctx, msg)
	case *actor.DeadLetterResponse:
		// The answer to an identification of a manager that does not run
		// (yet): identify again on the next tick. Buffered, it would take a
		// slot from the users' messages and later reach the singleton.
	case *actor.Terminated:
		if p.singleton != nil && p.singleton.Equal(msg.Who) {
			// Identify again on the next tick, not now: the manager may not
			// have seen the termination yet and would name the dead one.
			ctx.Logger().Debug("singleton proxy: singleton terminated; identifying again", slog.String("pid", msg.Who.String()))
			p.singleton = nil
		}
	case nil:
		deadletters.Publish(ctx.ActorSystem(), nil, nil, ctx.Sender(), "singleton proxy: nil message")
	case proto.Message:
		p.route(ctx, msg)
	default:
		// Checked before buffering, so a bad message never takes a buffer slot.
		deadletters.Publish(ctx.ActorSystem(), nil, msg, ctx.Sender(),
			fmt.Sprintf("singleton proxy: %T is not a protobuf message, so it cannot reach a singleton on another node", msg))
	}
}

func (p *proxy) route(ctx actor.Context, msg any) {
	if p.singleton == nil {
		p.buffered(ctx, bufferedMessage{message: msg, sender: ctx.Sender()})
		return
	}
	p.deliver(ctx, bufferedMessage{message: msg, sender: ctx.Sender()})
}

// deliver sends the message to the manager that runs the singleton, which
// hands it on; see messages.SingletonEnvelope for why not straight to it.
func (p *proxy) deliver(ctx actor.Context, b bufferedMessage) {
	pm, isProto := b.message.(proto.Message)
	if !isProto {
		deadletters.Publish(ctx.ActorSystem(), p.singleton, b.message, b.sender,
			fmt.Sprintf("singleton proxy: %T is not a protobuf message, so it cannot reach a singleton on another node", b.message))
		return
	}
	payload, err := anypb.New(pm)
	if err != nil {
		deadletters.Publish(ctx.ActorSystem(), p.singleton, b.message, b.sender,
			fmt.Sprintf("singleton proxy: cannot encode %T: %v", b.message, err))
		return
	}
	env := &messages.SingletonEnvelope{Message: payload, Sender: b.sender}
	if err := guard.CheckSize(env, guard.DefaultMaxMessageSize); err != nil {
		// Checked here, not only by the size limit on sends, so that the
		// event names the requester (the envelope carries it) and its
		// future fails at once.
		deadletters.PublishError(ctx.ActorSystem(), p.singleton, b.message, b.sender, fmt.Errorf("singleton proxy: %w", err))
		return
	}
	ctx.Send(actor.NewPID(p.singleton.Address, p.managerName), env)
}

func (p *proxy) buffered(ctx actor.Context, b bufferedMessage) {
	if p.settings.BufferSize == 0 {
		deadletters.Publish(ctx.ActorSystem(), nil, b.message, b.sender, "singleton proxy: singleton unknown and buffering is disabled")
		return
	}
	if dropped, full := p.buffer.AddDroppingOldest(struct{}{}, b); full {
		deadletters.PublishError(ctx.ActorSystem(), nil, dropped.message, dropped.sender,
			fmt.Errorf("singleton proxy: buffer is full (%d), dropping the oldest message: %w", p.settings.BufferSize, deadletter.ErrBufferFull))
	}
}

// forget drops the known singleton because the oldest changed: messages are
// buffered until the new oldest's manager says its singleton runs.
func (p *proxy) forget(ctx actor.Context) {
	if p.singleton != nil {
		ctx.Unwatch(p.singleton)
		p.singleton = nil
		p.singletonOf = ""
	}
}

func (p *proxy) identify(ctx actor.Context) {
	if p.tracker == nil || p.tracker.oldest == nil {
		return
	}
	manager := actor.NewPID(p.tracker.oldest.Address, p.managerName)
	ctx.Request(manager, &messages.SingletonIdentify{SingletonName: p.settings.SingletonName})
}

func (p *proxy) onIdentity(ctx actor.Context, msg *messages.SingletonIdentity) {
	if msg.Ref == nil || p.tracker == nil || p.tracker.oldest == nil || msg.MemberId != p.tracker.oldest.ID {
		return // not running yet, or an answer about a member that is no longer the oldest
	}
	if p.singleton != nil && p.singleton.Equal(msg.Ref) {
		return
	}
	p.singleton = msg.Ref
	p.singletonOf = msg.MemberId
	ctx.Watch(p.singleton)
	ctx.Logger().Debug("singleton proxy: singleton identified", slog.String("pid", p.singleton.String()),
		slog.Int("buffered", p.buffer.Len()))
	for _, b := range p.buffer.Take(struct{}{}) {
		p.deliver(ctx, b)
	}
}
