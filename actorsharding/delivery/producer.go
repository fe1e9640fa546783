package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/behavior"
	"github.com/protoshard/protoshard/internal/deadletters"
	"github.com/protoshard/protoshard/internal/dispatch"
	"github.com/protoshard/protoshard/internal/entityrefs"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/metrics"
	"github.com/protoshard/protoshard/internal/option"
	"github.com/protoshard/protoshard/internal/storescope"
	"github.com/protoshard/protoshard/internal/ticker"
	"github.com/protoshard/protoshard/messages"
	"google.golang.org/protobuf/proto"
)

// The producer controller's states; they appear in logs.
const (
	// stateLoading: the controller claims and reads its durable queue;
	// Sends wait.
	stateLoading = "loading"
	// stateActive: the controller sends.
	stateActive = "active"
	// stateStopping: the controller stopped accepting and finishes its
	// writes to the durable queue before it closes it.
	stateStopping = "stopping"
)

// ShardingProducerController sends one producer's messages to the entities
// of one type, at least once and in order per entity (Akka's
// ShardingProducerController): it numbers them per entity, keeps each until
// the entity's ShardingConsumerController confirms it, sends no more than
// the entity asked for, and resends what the entity did not get (it
// restarted, moved, or a message was lost). With a durable queue
// (WithDurableQueue) it stores each message before it sends
// it, so that a controller started again continues where this one
// stopped. Its methods are safe for concurrent use.
type ShardingProducerController struct {
	system *actor.ActorSystem
	pid    *actor.PID
	// stopped is closed when the controller stopped; stopErr, set before,
	// says why (ErrProducerStopped, or the durable queue's error).
	stopped  chan struct{}
	stopErr  error
	stopOnce sync.Once
	durable  bool // with a durable queue: a Send is answered once stored
	// queue takes the Sends that need no answer from the controller;
	// limits packs and checks their messages on the caller's goroutine.
	queue  *sendQueue
	limits messageLimits
	// anyOnSend: the controller's last new message went to an entity on
	// this node, which gets the full form: Send makes its Any on the
	// caller's goroutine then, not on the controller's, which every
	// message goes through. Only a guess of where the next goes: a wrong
	// one costs an Any made for nothing, or made by the controller.
	anyOnSend atomic.Bool
}

// StartShardingProducerController starts the controller of producer
// producerID for the entities of typeName, whose region or proxy runs on
// this node. producerID names the producer to the entities: give each
// producer its own. An option with a value it does not accept fails with
// ErrInvalidOption.
func StartShardingProducerController(s *actorsharding.Sharding, typeName, producerID string, opts ...ProducerOption) (*ShardingProducerController, error) {
	if producerID == "" {
		return nil, errors.New("delivery: empty producer ID")
	}
	settings := defaultProducerSettings()
	if err := option.Apply(&settings, opts, ErrInvalidOption); err != nil {
		return nil, fmt.Errorf("delivery: producer %q: %w", producerID, err)
	}
	if _, ok := s.Region(typeName); !ok {
		return nil, fmt.Errorf("delivery: producer %q: %w", producerID, actorsharding.ErrNotStarted)
	}
	if err := storescope.Check("durable producer queue", settings.DurableQueue, s.Cluster().Name(), typeName); err != nil {
		return nil, fmt.Errorf("delivery: producer %q: %w", producerID, err)
	}
	system := s.System()
	settings = settings.withDefaults()
	p := &ShardingProducerController{system: system, stopped: make(chan struct{}), durable: settings.DurableQueue != nil,
		queue: newSendQueue(settings.BufferSize)}
	props := actor.PropsFromProducer(func() actor.Actor {
		c := &producerController{sharding: s, typeName: typeName, producerID: producerID, settings: settings,
			handle: p, refs: map[string]*actorsharding.EntityRef{}, waiting: map[confirmation]chan error{}, batch: entityrefs.NewBatch()}
		return c
	}, guard.WithMailbox(),
		// A producer handed one Send at a time would otherwise start a
		// goroutine, and grow its stack, for almost every message.
		actor.WithDispatcher(dispatch.Mailboxes))
	pid, err := system.Root.SpawnNamed(props, "delivery/"+typeName+"/"+producerID)
	if err != nil {
		return nil, fmt.Errorf("delivery: start producer %q of %s: %w", producerID, typeName, err)
	}
	p.pid = pid
	p.limits = newMessageLimits(producerID, pid, settings.MaxMessageSize, 0)
	return p, nil
}

// sendRequest is a Send or SendWithConfirmation for the actor.
type sendRequest struct {
	entityID string
	msg      proto.Message
	payload  packed // msg packed and checked (none yet: accept packs it)
	ack      bool
	done     chan error // buffered: accepted (or confirmed, with ack) or why not
	// accepted is closed once the controller numbered the message (ack
	// only): from then on it is delivered unless the controller stops.
	accepted chan struct{}
	// slot decides between the controller taking the request and Send
	// giving up on it (its context ended) while it waits: whoever moves it
	// from sendWaiting first. A request Send gave up is never numbered, so
	// an error from Send means the message was not accepted.
	slot atomic.Int32
}

// The states of sendRequest.slot.
const (
	sendWaiting int32 = iota
	sendTaken
	sendAbandoned
)

// take is the controller's claim on r; false: Send gave up on it.
func (r *sendRequest) take() bool { return r.slot.CompareAndSwap(sendWaiting, sendTaken) }

// abandon is Send's; false: the controller took r already.
func (r *sendRequest) abandon() bool { return r.slot.CompareAndSwap(sendWaiting, sendAbandoned) }

// Send hands msg to the controller for entityID. nil: accepted, numbered
// in the order of the Sends, stored when there is a durable queue, and
// sent or buffered until the entity asks for it; it is delivered unless
// this producer stops first without a durable queue. These errors mean it
// was not accepted, so sending it again sends it once: ErrBufferFull (the
// entity asked for nothing and BufferSize messages already wait; try
// again later), ErrMessageTooLarge, ErrProducerStopped, or ctx's error if
// ctx ended before the controller took the message. Without a durable
// queue, while the buffer has room for msg whatever the entity's demand,
// Send packs and checks msg itself and returns without waiting for the
// controller; otherwise it waits for the controller's answer, which comes
// at once without a durable queue, and is bounded by the queue's
// time-outs and retries with one. ErrQueueFenced and ErrQueueFailed say
// the durable queue stopped the controller while the message was being
// stored: it may be stored all the same (a write that failed late, or a
// Consul write split over transactions), and then a controller started
// again with the queue delivers it. An entity on this node may get msg
// itself, not a copy, as with EntityRef.Send: do not change msg once
// sent.
func (p *ShardingProducerController) Send(ctx context.Context, entityID string, msg proto.Message) error {
	if p.durable {
		return p.send(ctx, entityID, msg, false)
	}
	if err := p.stoppedErr(); err != nil {
		return fmt.Errorf("delivery: send to %q: %w", entityID, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delivery: send to %q: not accepted: %w", entityID, err)
	}
	payload, err := p.limits.pack(entityID, msg)
	if err != nil {
		return fmt.Errorf("delivery: producer %s: %w", p.pid.GetId(), err)
	}
	// What the controller would allocate is allocated here, on the
	// caller's goroutine: the controller's, which every message goes
	// through, bounds the rate.
	payload.shell = &messages.SequencedMessage{}
	if p.anyOnSend.Load() {
		payload.full = payload.any()
		payload.local = &localSequenced{msg: msg}
	}
	// Without a durable queue the controller refuses a Send only for a
	// full buffer: while the buffer has room whatever the demand, the Send
	// is accepted without waiting for the controller.
	switch p.queue.offer(queuedSend{entityID: entityID, msg: msg, payload: payload}) {
	case offerQueuedWake:
		p.system.Root.Send(p.pid, drainSends{})
		return nil
	case offerQueued:
		return nil
	case offerClosed:
		return fmt.Errorf("delivery: send to %q: %w", entityID, p.stoppedErr())
	}
	return p.request(ctx, &sendRequest{entityID: entityID, msg: msg, payload: payload, done: make(chan error, 1)})
}

// SendWithConfirmation is Send that returns once the entity confirmed msg
// (Akka's askNextTo). With a durable queue it returns once msg is stored,
// as Akka's does. If ctx ends after the controller accepted msg but before
// the entity confirmed it, the error wraps ErrUnconfirmed and ctx's error:
// msg is delivered all the same, so do not send it again.
func (p *ShardingProducerController) SendWithConfirmation(ctx context.Context, entityID string, msg proto.Message) error {
	return p.send(ctx, entityID, msg, true)
}

func (p *ShardingProducerController) send(ctx context.Context, entityID string, msg proto.Message, ack bool) error {
	if err := p.stoppedErr(); err != nil {
		return fmt.Errorf("delivery: send to %q: %w", entityID, err)
	}
	r := &sendRequest{entityID: entityID, msg: msg, ack: ack, done: make(chan error, 1)}
	if ack {
		r.accepted = make(chan struct{})
	}
	return p.request(ctx, r)
}

// request hands r to the controller and waits for its answer.
func (p *ShardingProducerController) request(ctx context.Context, r *sendRequest) error {
	entityID, ack := r.entityID, r.ack
	p.system.Root.Send(p.pid, r)
	select {
	case err := <-r.done:
		return err
	case <-p.stopped:
		return p.afterStop(r)
	case <-ctx.Done():
	}
	if r.abandon() {
		return fmt.Errorf("delivery: send to %q: not accepted: %w", entityID, ctx.Err())
	}
	// The controller took it: it answers at once without a durable queue,
	// once the write ends with one; only a confirmation may take long.
	var accepted chan struct{}
	if ack && !p.durable {
		accepted = r.accepted
	}
	select {
	case err := <-r.done:
		return err
	case <-accepted:
		return fmt.Errorf("delivery: send to %q: %w: %w", entityID, ErrUnconfirmed, ctx.Err())
	case <-p.stopped:
		return p.afterStop(r)
	}
}

// afterStop is Send's answer once the controller stopped: the controller
// answers every Send it took before it stops.
func (p *ShardingProducerController) afterStop(r *sendRequest) error {
	select {
	case err := <-r.done:
		return err
	default:
		return fmt.Errorf("delivery: send to %q: %w", r.entityID, p.stopErr)
	}
}

// stoppedErr is why the controller stopped, nil while it runs.
func (p *ShardingProducerController) stoppedErr() error {
	select {
	case <-p.stopped:
		return p.stopErr
	default:
		return nil
	}
}

// finish records that the controller stopped because of err; the first
// reason counts.
func (p *ShardingProducerController) finish(err error) {
	p.stopOnce.Do(func() {
		p.stopErr = err
		close(p.stopped)
	})
}

type getStats struct{ done chan ProducerStats }

// Stats reports the controller's counts; after it stopped, why it
// stopped.
func (p *ShardingProducerController) Stats(ctx context.Context) (ProducerStats, error) {
	if err := p.stoppedErr(); err != nil {
		return ProducerStats{}, err
	}
	r := &getStats{done: make(chan ProducerStats, 1)}
	p.system.Root.Send(p.pid, r)
	select {
	case st := <-r.done:
		return st, nil
	case <-p.stopped:
		return ProducerStats{}, p.stopErr
	case <-ctx.Done():
		return ProducerStats{}, ctx.Err()
	}
}

type stopProducer struct{}

// Stop stops the controller. Without a durable queue, messages the
// entities have not confirmed yet are dropped, each with a dead-letter
// event (ErrProducerStopped), and a SendWithConfirmation still waiting
// fails with ErrProducerStopped. With one, they stay stored for the next
// controller: Stop returns once the writes under way are done and the
// queue is closed.
func (p *ShardingProducerController) Stop(ctx context.Context) error {
	if p.stoppedErr() != nil {
		return nil
	}
	p.system.Root.Send(p.pid, &stopProducer{})
	select {
	case <-p.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The controller's timers.
type (
	resendFirstTick struct{}
	idleCheckTick   struct{}
	cleanupTick     struct{}
)

// loadCall decides between a LoadState reporting its result and the
// controller, stopped meanwhile, leaving it to release what it claimed.
type loadCall struct{ state atomic.Int32 } // 0 running, 1 reported, 2 abandoned

func (l *loadCall) report() bool  { return l.state.CompareAndSwap(0, 1) }
func (l *loadCall) abandon() bool { return l.state.CompareAndSwap(0, 2) }

// Results of the durable queue's calls, run off the mailbox.
type (
	loadResult struct {
		state *messages.DurableProducerQueueState
		err   error
	}
	queueClosed struct{ err error }
)

// producerController is the actor: it carries out what producerState
// decides, and runs the durable queue's calls off its mailbox, one at a
// time, each result coming back as a message.
type producerController struct {
	sharding   *actorsharding.Sharding
	typeName   string
	producerID string
	settings   producerSettings
	handle     *ShardingProducerController

	states  behavior.States
	state   *producerState
	refs    map[string]*actorsharding.EntityRef
	waiting map[confirmation]chan error // SendWithConfirmation by entity and seqNr, without a queue
	// batch sends each turn's messages to another node's region together
	// (see entityrefs.Batch); flushed at the end of every turn, and before
	// anything that may wait.
	batch   entityrefs.Batch
	timers  *scheduler.TimerScheduler
	cancels []scheduler.CancelFunc

	metrics  *metrics.Delivery // nil without a MetricsProvider
	reported ProducerStats     // what the metrics have been told

	held        []*sendRequest // Sends that came while loading
	loadAttempt int
	loading     bool      // a LoadState runs
	loadRun     *loadCall // the one that runs or ran last
	claimed     bool      // a LoadState succeeded: the claim is this controller's to release
	closing     bool      // the queue's Close was called
	stopErr     error     // why the controller stops (stopping)
	// tookQueued: Sends were taken from the queue since it was last told
	// heldQueued, the messages buffered.
	tookQueued bool
	heldQueued int
}

func (c *producerController) Receive(ctx actor.Context) {
	// Deferred: what the batch holds keeps its homes open, even if the
	// turn panics.
	defer c.batch.Flush()
	if c.states.Name() == "" {
		// Started, which picks the first state, is handled alike in every
		// state (common).
		c.active(ctx)
	} else {
		c.states.Receive(ctx)
	}
	c.holdQueued()
	c.report(ctx.Message())
}

// report adds what the counters gained since the last report to the
// metrics and, on the idle check (every half of
// ResendFirstUnconfirmedIdleTimeout) and when the controller stops, moves
// the gauges: counting the unconfirmed messages visits every entity.
func (c *producerController) report(msg any) {
	if c.metrics == nil || c.state == nil {
		return
	}
	now := c.state.counters
	c.metrics.Counted(now.Sent-c.reported.Sent, now.Resent-c.reported.Resent, now.Confirmed-c.reported.Confirmed)
	c.reported.Sent, c.reported.Resent, c.reported.Confirmed = now.Sent, now.Resent, now.Confirmed
	var unconfirmed, buffered int
	switch msg.(type) {
	case idleCheckTick:
		st := c.state.stats()
		unconfirmed, buffered = st.Unconfirmed, st.Buffered
	case *actor.Stopped:
	default:
		return
	}
	c.metrics.Pending(int64(unconfirmed-c.reported.Unconfirmed), int64(buffered-c.reported.Buffered))
	c.reported.Unconfirmed, c.reported.Buffered = unconfirmed, buffered
}

func (c *producerController) become(ctx actor.Context, name string, receive actor.ReceiveFunc) {
	c.states.Become(ctx, "delivery: producer controller", name, receive,
		slog.String("type", c.typeName), slog.String("producer", c.producerID))
}

// common handles what every state handles alike; false: not one of those.
func (c *producerController) common(ctx actor.Context) bool {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c.state = newProducerState(c.producerID, ctx.Self(), c.settings, nil)
		c.metrics = metrics.For(ctx.ActorSystem()).Delivery(c.typeName)
		c.timers = scheduler.NewTimerScheduler(ctx)
		c.cancels = append(c.cancels,
			ticker.SendRepeatedly(ctx, c.settings.ResendFirstInterval, c.settings.ResendFirstInterval, ctx.Self(), resendFirstTick{}),
			ticker.SendRepeatedly(ctx, c.settings.ResendFirstUnconfirmedIdleTimeout/2, c.settings.ResendFirstUnconfirmedIdleTimeout/2, ctx.Self(), idleCheckTick{}),
			ticker.SendRepeatedly(ctx, c.settings.CleanupUnusedAfter, c.settings.CleanupUnusedAfter, ctx.Self(), cleanupTick{}))
		if c.settings.DurableQueue != nil {
			c.become(ctx, stateLoading, c.loadingState)
			c.load(ctx, 0)
		} else {
			c.become(ctx, stateActive, c.active)
		}
		ctx.Logger().Debug("delivery: producer controller started", append(c.attrs(), slog.Bool("durable", c.settings.DurableQueue != nil))...)
	case *actor.Stopping:
		for _, cancel := range c.cancels {
			cancel()
		}
	case *actor.Stopped:
		// Stopped from outside (the actor system shuts down): what waits
		// is told, and the queue's claim released. A LoadState that still
		// runs releases what it claims itself; one whose result came too
		// late to be read may have claimed: Close (a queue releases only a
		// claim it took).
		if q := c.settings.DurableQueue; q != nil && !c.closing {
			switch {
			case c.loading && c.loadRun.abandon():
			case c.loading || c.claimed:
				c.closing = true
				go func() { _ = q.Close() }()
			}
		}
		c.finish(ctx, ErrProducerStopped)
	case *getStats:
		msg.done <- c.state.stats()
	case drainSends:
		// Not active: the controller stops, or loads its durable queue
		// (whose Sends are not queued).
		err := c.stopErr
		if err == nil {
			err = ErrProducerStopped
		}
		for _, s := range c.handle.queue.take() {
			c.dropQueued(ctx, s, err)
		}
	case *actor.Restarting, resendFirstTick, idleCheckTick, cleanupTick:
	case *actor.DeadLetterResponse:
		// A message sent with this controller as its sender became a dead
		// letter, reported as such; it is resent as any lost one.
	default:
		return false
	}
	return true
}

func (c *producerController) unknown(ctx actor.Context) {
	msg := ctx.Message()
	deadletters.Publish(ctx.ActorSystem(), ctx.Self(), msg, ctx.Sender(),
		fmt.Sprintf("delivery producer %s: %T is no message of this controller (state %s)", c.producerID, msg, c.states.Name()))
}

// loadingState: the durable queue's content is read; Sends wait, replies
// of entities to an earlier controller are ignored (they ask again).
func (c *producerController) loadingState(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *sendRequest:
		if len(c.held) >= c.settings.BufferSize {
			msg.done <- fmt.Errorf("delivery: producer %s, entity %q: loading its durable queue, %d sends wait: %w",
				c.producerID, msg.entityID, len(c.held), ErrBufferFull)
			return
		}
		c.held = append(c.held, msg)
	case *loadResult:
		c.onLoaded(ctx, msg)
	case *stopProducer:
		c.stopErr = ErrProducerStopped
		c.become(ctx, stateStopping, c.stopping)
		c.failHeld(ErrProducerStopped)
	case *messages.Request, *messages.Ack, *messages.Resend:
	default:
		if !c.common(ctx) {
			c.unknown(ctx)
		}
	}
}

// load runs LoadState off the mailbox after delay.
func (c *producerController) load(ctx actor.Context, delay time.Duration) {
	self, root, q, timeout := ctx.Self(), ctx.ActorSystem().Root, c.settings.DurableQueue, c.settings.DurableQueueRequestTimeout
	c.loading = true
	c.loadAttempt++
	call := &loadCall{}
	c.loadRun = call
	go func() {
		time.Sleep(delay)
		lctx, cancel := context.WithTimeout(context.Background(), timeout)
		st, err := q.LoadState(lctx)
		cancel()
		if !call.report() {
			// The controller stopped meanwhile: nobody else releases it.
			if err == nil {
				_ = q.Close()
			}
			return
		}
		root.Send(self, &loadResult{state: st, err: err})
	}()
}

func (c *producerController) onLoaded(ctx actor.Context, r *loadResult) {
	c.loading = false
	if r.err != nil {
		delay, err := c.settings.queueRetry().next(c.loadAttempt, r.err)
		if err == nil {
			ctx.Logger().Warn("delivery: loading the durable queue failed, retrying", append(c.attrs(),
				slog.Int("attempt", c.loadAttempt), slog.Duration("delay", delay), slog.Any("error", r.err))...)
			c.load(ctx, delay)
			return
		}
		c.fail(ctx, err)
		return
	}
	c.claimed = true
	out, err := c.state.load(r.state, time.Now())
	if err != nil {
		// Claimed but unusable: closed again by fail.
		c.fail(ctx, fmt.Errorf("%w: %w", ErrQueueFailed, err))
		return
	}
	ctx.Logger().Debug("delivery: durable queue loaded", append(c.attrs(), slog.Int("entities", len(r.state.GetEntities())),
		slog.Int("unconfirmed", len(r.state.GetUnconfirmed())))...)
	c.become(ctx, stateActive, c.active)
	c.carryOut(ctx, out, nil, nil)
	held := c.held
	c.held = nil
	for _, h := range held {
		c.onSend(ctx, h)
	}
	c.writes(ctx)
}

// active: the controller sends.
func (c *producerController) active(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case drainSends:
		c.takeQueued(ctx)
	case *sendRequest:
		// Queued Sends first: one goroutine's Sends keep their order.
		c.takeQueued(ctx)
		c.onSend(ctx, msg)
	case *messages.Request:
		out, err := c.state.onRequest(msg, time.Now())
		c.carryOut(ctx, out, msg, err)
	case *messages.Ack:
		out, err := c.state.onAck(msg, time.Now())
		c.carryOut(ctx, out, msg, err)
	case *messages.Resend:
		out, err := c.state.onResend(msg)
		c.carryOut(ctx, out, msg, err)
	case resendFirstTick:
		if c.state.needsResendFirst() {
			c.carryOut(ctx, c.state.onResendFirstTick(), nil, nil)
		}
	case idleCheckTick:
		c.carryOut(ctx, c.state.onIdleTick(time.Now()), nil, nil)
	case cleanupTick:
		for _, id := range c.state.cleanup(time.Now()) {
			delete(c.refs, id)
		}
	case *storeResult:
		c.onStored(ctx, msg)
		return
	case *stopProducer:
		if c.settings.DurableQueue == nil {
			c.takeQueued(ctx)
			c.stop(ctx)
			return
		}
		c.state.stop()
		c.stopErr = ErrProducerStopped
		c.become(ctx, stateStopping, c.stopping)
		c.closeWhenIdle(ctx)
		return
	default:
		if !c.common(ctx) {
			c.unknown(ctx)
		}
		return
	}
	c.writes(ctx)
}

// stopping: no more Sends; the writes under way finish, then the durable
// queue is closed and the actor stops.
func (c *producerController) stopping(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *sendRequest:
		msg.done <- fmt.Errorf("delivery: producer %s, entity %q: %w", c.producerID, msg.entityID, c.stopErr)
	case *storeResult:
		c.onStored(ctx, msg)
	case *loadResult:
		c.loading = false
		c.claimed = msg.err == nil
		c.closeWhenIdle(ctx)
	case *queueClosed:
		if msg.err != nil {
			ctx.Logger().Warn("delivery: closing the durable queue failed", append(c.attrs(), slog.Any("error", msg.err))...)
		}
		c.finish(ctx, c.stopErr)
		ctx.Stop(ctx.Self())
	case *stopProducer, *messages.Request, *messages.Ack, *messages.Resend:
	default:
		if !c.common(ctx) {
			c.unknown(ctx)
		}
	}
}

func (c *producerController) attrs() []any {
	return []any{slog.String("type", c.typeName), slog.String("producer", c.producerID), slog.String("state", c.states.Name())}
}

func (c *producerController) onSend(ctx actor.Context, r *sendRequest) {
	if !r.take() {
		return // its Send gave up: not numbered, as it was told
	}
	out, err := c.state.accept(r, time.Now())
	if err != nil {
		r.done <- fmt.Errorf("delivery: producer %s, entity %q: %w", c.producerID, r.entityID, err)
		return
	}
	if r.accepted != nil {
		close(r.accepted)
	}
	switch {
	case c.state.durable:
		// Answered once stored.
	case r.ack:
		c.waiting[confirmation{entityID: r.entityID, seqNr: c.state.lastAccepted(r.entityID)}] = r.done
	default:
		r.done <- nil
	}
	c.sendOut(ctx, out, queuedSend{msg: r.msg, payload: r.payload})
}

// writes starts the next write to the durable queue, if one is due.
func (c *producerController) writes(ctx actor.Context) {
	if !c.state.durable {
		return
	}
	w := c.state.store.begin(time.Now())
	if w == nil {
		return
	}
	self, root, q, timeout := ctx.Self(), ctx.ActorSystem().Root, c.settings.DurableQueue, c.settings.DurableQueueRequestTimeout
	go func() {
		time.Sleep(w.delay)
		r := &storeResult{write: w}
		call := func(f func(context.Context) error) error {
			cctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return f(cctx)
		}
		if len(w.cleanup) > 0 && !w.cleanupDone {
			if r.err = call(func(ctx context.Context) error { return q.Cleanup(ctx, w.cleanup) }); r.err != nil {
				root.Send(self, r)
				return
			}
			r.cleanupDone = true
		}
		if len(w.sent) > 0 && !w.sentDone {
			if r.err = call(func(ctx context.Context) error { return q.StoreMessageSent(ctx, w.sent) }); r.err != nil {
				root.Send(self, r)
				return
			}
			r.sentDone = true
		}
		if len(w.confirmed) > 0 && !w.confirmedDone {
			r.err = call(func(ctx context.Context) error { return q.StoreMessageConfirmed(ctx, w.confirmed) })
			r.confirmedDone = r.err == nil
		}
		root.Send(self, r)
	}()
}

// onStored carries out a write's result: stored messages are sent (or
// buffered) and their Sends answered; a queue that failed stops the
// controller.
func (c *producerController) onStored(ctx actor.Context, r *storeResult) {
	so, err := c.state.onStored(*r, time.Now())
	if err != nil {
		c.fail(ctx, fmt.Errorf("%w: %w", ErrQueueFailed, err))
		return
	}
	for _, reply := range so.stored {
		reply.done <- nil
	}
	if c.states.Name() == stateActive {
		c.carryOut(ctx, so.out, nil, nil)
	}
	if so.failed != nil {
		for _, reply := range so.unstored {
			reply.done <- fmt.Errorf("delivery: producer %s, entity %q: %w", c.producerID, reply.entityID, so.failed)
		}
		c.fail(ctx, so.failed)
		return
	}
	if r.err != nil {
		ctx.Logger().Warn("delivery: writing to the durable queue failed, retrying", append(c.attrs(),
			slog.Int("attempt", r.write.attempt-1), slog.Duration("delay", r.write.delay), slog.Any("error", r.err))...)
	}
	c.writes(ctx)
	if c.states.Name() == stateStopping {
		c.closeWhenIdle(ctx)
	}
}

// fail stops the controller because its durable queue failed or was
// fenced: every Send waiting and every later one fails with err.
func (c *producerController) fail(ctx actor.Context, err error) {
	ctx.Logger().Error("delivery: producer controller stops: its durable queue failed", append(c.attrs(), slog.Any("error", err))...)
	c.state.stop()
	c.failHeld(err)
	c.stopErr = err
	c.become(ctx, stateStopping, c.stopping)
	c.closeWhenIdle(ctx)
}

func (c *producerController) failHeld(err error) {
	for _, h := range c.held {
		h.done <- fmt.Errorf("delivery: producer %s, entity %q: %w", c.producerID, h.entityID, err)
	}
	c.held = nil
}

// closeWhenIdle closes the durable queue once no call to it runs and no
// write waits (or the queue failed), then the actor stops (queueClosed).
func (c *producerController) closeWhenIdle(ctx actor.Context) {
	if c.loading || !c.state.store.quiet() || c.closing {
		return
	}
	c.closing = true
	self, root, q := ctx.Self(), ctx.ActorSystem().Root, c.settings.DurableQueue
	if !c.claimed {
		// Never claimed (LoadState failed or was fenced): the claim, if
		// any, is another controller's.
		root.Send(self, &queueClosed{})
		return
	}
	go func() { root.Send(self, &queueClosed{err: q.Close()}) }()
}

// carryOut sends what a transition asks for; err is the transition's
// refusal of in (a stale or invalid reply from an entity).
func (c *producerController) carryOut(ctx actor.Context, out outOutput, in any, err error) {
	if err != nil {
		ctx.Logger().Debug("delivery: producer ignored an entity's reply", append(c.attrs(), slog.Any("reason", err),
			slog.String("message", fmt.Sprintf("%T", in)))...)
		return
	}
	c.sendOut(ctx, out, queuedSend{})
}

// sendOut sends what out asks for. took, if any, is the Send whose
// acceptance made out: if its message goes now (out.accepted), to an
// entity on this node, the entity gets that message object itself.
func (c *producerController) sendOut(ctx actor.Context, out outOutput, took queuedSend) {
	for _, m := range out.resend {
		c.deliver(ctx, m, false, nil)
	}
	for _, m := range out.send {
		var t *queuedSend
		if took.msg != nil && m == out.accepted {
			t = &took
		}
		c.deliver(ctx, m, true, t)
	}
	for _, cf := range out.confirmed {
		if done, ok := c.waiting[cf]; ok {
			done <- nil
			delete(c.waiting, cf)
		}
	}
}

// deliver sends m to its entity through the entity's ref. A new m (not
// resent) is numbered in short form and made the form it goes in, in
// place, as it is kept. If its entity runs on another node, it goes in
// short form if it may, with this controller as the sender: the short
// form leaves out the type URL and the PID, and the batch (c.batch) sends
// a turn's messages to one node together, with their sender once. If its
// entity runs on this node and took, the Send that m numbers, is not nil,
// the entity gets took's message itself with m (localSequenced), straight
// in its mailbox as the ref's direct path sends, without decoding m's
// Any. Otherwise m goes in full form. Every form goes the same way, so
// they keep their order.
func (c *producerController) deliver(ctx actor.Context, m *messages.SequencedMessage, isNew bool, took *queuedSend) {
	ref, ok := c.refs[m.GetEntityId()]
	if !ok {
		c.batch.Flush() // EntityRefFor takes a lock
		r, err := c.sharding.EntityRefFor(c.typeName, m.GetEntityId())
		if err != nil {
			c.publishDrop(ctx, c.state.fullForm(m),
				fmt.Errorf("delivery producer %s: entity %q: %w (resent later)", c.producerID, m.GetEntityId(), err))
			return
		}
		ref = &r
		c.refs[m.GetEntityId()] = ref
	}
	// Send guessed this node (anyOnSend): try the direct path first,
	// without asking where the entity runs.
	tried := took != nil && took.payload.local != nil
	if tried && c.sendDirect(ref, m, took) {
		return
	}
	var sender *actor.PID
	here := isNew && entityrefs.RunsHere(ref)
	if took != nil && here != c.handle.anyOnSend.Load() {
		c.handle.anyOnSend.Store(here)
	}
	switch {
	case here && took != nil:
		if !tried && c.sendDirect(ref, m, took) {
			return
		}
	case isNew:
		short, err := c.state.forSending(m, !here)
		if err != nil {
			// Not so: out.send holds only messages of current numberings.
			c.publishDrop(ctx, m,
				fmt.Errorf("delivery producer %s: entity %q: %w", c.producerID, m.GetEntityId(), err))
			return
		}
		if short {
			sender = ctx.Self()
		}
	}
	if err := c.batch.Send(ref, m, sender); err != nil {
		c.publishDrop(ctx, m,
			fmt.Errorf("delivery producer %s: entity %q: %w (resent later)", c.producerID, m.GetEntityId(), err))
	}
}

// publishDrop reports m, which could not be sent, as a dead letter, after
// sending what the batch holds: a subscriber may wait.
func (c *producerController) publishDrop(ctx actor.Context, m any, err error) {
	c.batch.Flush()
	deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), m, nil, err)
}

// sendDirect puts m, new, in full form with took's message itself,
// straight in the mailbox of its entity, if it runs on this node and the
// ref's direct path is open; false: nothing was sent (m may be in full
// form now).
func (c *producerController) sendDirect(ref *actorsharding.EntityRef, m *messages.SequencedMessage, took *queuedSend) bool {
	c.state.inFullFormFor(m, took.msg, took.payload.full)
	local := took.payload.local
	if local == nil {
		local = &localSequenced{msg: took.msg}
	}
	local.seq = m
	return entityrefs.SendDirect(ref, local)
}

// stop, without a durable queue, drops what is not confirmed, with a
// dead-letter event each, fails the waiting SendWithConfirmations, and
// stops the actor.
func (c *producerController) stop(ctx actor.Context) {
	c.batch.Flush()
	c.state.stop()
	for _, m := range c.state.undelivered() {
		deadletters.PublishError(ctx.ActorSystem(), ctx.Self(), m, nil,
			fmt.Errorf("delivery producer %s: entity %q, seqNr %d: %w", c.producerID, m.GetEntityId(), m.GetSeqNr(), ErrProducerStopped))
	}
	for cf, done := range c.waiting {
		done <- fmt.Errorf("delivery: producer %s, entity %q: %w", c.producerID, cf.entityID, ErrProducerStopped)
		delete(c.waiting, cf)
	}
	c.finish(ctx, ErrProducerStopped)
	ctx.Stop(ctx.Self())
}

// finish tells the handle the controller stopped because of err, then
// drops, each with a dead-letter event, the Sends still queued: accepted
// after the last take, they can no longer be delivered.
func (c *producerController) finish(ctx actor.Context, err error) {
	c.handle.finish(err)
	for _, s := range c.handle.queue.close() {
		c.dropQueued(ctx, s, err)
	}
}

func (c *producerController) dropQueued(ctx actor.Context, s queuedSend, err error) {
	c.publishDrop(ctx, s.msg, fmt.Errorf("delivery producer %s: entity %q: %w", c.producerID, s.entityID, err))
}

// takeQueued numbers and sends (or buffers) the Sends the queue holds.
func (c *producerController) takeQueued(ctx actor.Context) {
	batch := c.handle.queue.take()
	if len(batch) == 0 {
		return
	}
	c.tookQueued = true
	now := time.Now()
	for _, s := range batch {
		out, err := c.state.acceptQueued(s, now)
		if err != nil {
			c.dropQueued(ctx, s, err)
			continue
		}
		c.sendOut(ctx, out, s)
	}
}

// holdQueued tells the queue how many messages the controller buffers,
// once it took Sends from it or the count changed.
func (c *producerController) holdQueued() {
	if c.state == nil {
		return
	}
	if n := c.state.buffered + c.state.storing; c.tookQueued || n != c.heldQueued {
		c.handle.queue.hold(n)
		c.tookQueued, c.heldQueued = false, n
	}
}
