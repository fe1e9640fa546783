package delivery

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protoshard/protoshard/deadletter"
	"github.com/protoshard/protoshard/internal/guard"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
)

// Incarnations handed out by the fake source: entities created first get
// incA, then incB, ...
const (
	incA uint64 = 101
	incB uint64 = 102
	incC uint64 = 103
)

type harness struct {
	p   *producerState
	now time.Time
	n   int64 // messages accepted, numbers the Ping payloads
}

func newHarness(settings producerSettings) *harness {
	next := uint64(100)
	inc := func() (uint64, error) { next++; return next, nil }
	pid := actor.NewPID("nonhost", "producer-controller")
	return &harness{p: newProducerState("prod", pid, settings, inc), now: time.Unix(1000, 0)}
}

// producerStep drives one input and states the whole output it must produce.
// Messages read "entity/seq", with "*" when first and "!" when ack.
type producerStep struct {
	name      string
	run       func(h *harness) (outOutput, error)
	send      []string
	resend    []string
	confirmed []string
	changed   bool
	err       error // errors.Is; output must then be empty
	check     func(t *testing.T, h *harness)
}

func render(ms []*messages.SequencedMessage) []string {
	var out []string
	for _, m := range ms {
		s := fmt.Sprintf("%s/%d", m.GetEntityId(), m.GetSeqNr())
		if m.GetFirst() {
			s += "*"
		}
		if m.GetAck() {
			s += "!"
		}
		out = append(out, s)
	}
	return out
}

func renderConfirmed(cs []confirmation) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s/%d", c.entityID, c.seqNr))
	}
	return out
}

func send(entity string) func(*harness) (outOutput, error) { return acceptStep(entity, false) }

func sendAck(entity string) func(*harness) (outOutput, error) { return acceptStep(entity, true) }

func acceptStep(entity string, ack bool) func(*harness) (outOutput, error) {
	return func(h *harness) (outOutput, error) {
		h.n++
		return h.p.accept(&sendRequest{entityID: entity, msg: &testpb.Ping{EntityId: entity, Seq: h.n}, ack: ack}, h.now)
	}
}

// cleanup runs producerState.cleanup; removing other entities than want is
// the step's error.
func cleanup(want ...string) func(*harness) (outOutput, error) {
	return func(h *harness) (outOutput, error) {
		if got := h.p.cleanup(h.now); !reflect.DeepEqual(got, want) {
			return outOutput{}, fmt.Errorf("cleaned %v, want %v", got, want)
		}
		return outOutput{}, nil
	}
}

func request(entity string, inc uint64, confirmed, upTo int64) func(*harness) (outOutput, error) {
	return requestWith(&messages.Request{EntityId: entity, ProducerIncarnation: inc,
		ConfirmedSeqNr: confirmed, RequestUpToSeqNr: upTo, SupportResend: true})
}

func requestWith(r *messages.Request) func(*harness) (outOutput, error) {
	return func(h *harness) (outOutput, error) { return h.p.onRequest(r, h.now) }
}

func ack(entity string, inc uint64, confirmed int64) func(*harness) (outOutput, error) {
	return func(h *harness) (outOutput, error) {
		return h.p.onAck(&messages.Ack{EntityId: entity, ProducerIncarnation: inc, ConfirmedSeqNr: confirmed}, h.now)
	}
}

func resend(entity string, inc uint64, from int64) func(*harness) (outOutput, error) {
	return func(h *harness) (outOutput, error) {
		return h.p.onResend(&messages.Resend{EntityId: entity, ProducerIncarnation: inc, FromSeqNr: from})
	}
}

func firstTick(h *harness) (outOutput, error) { return h.p.onResendFirstTick(), nil }

func idleTick(h *harness) (outOutput, error) { return h.p.onIdleTick(h.now), nil }

// advance moves the clock; no output.
func advance(d time.Duration) func(*harness) (outOutput, error) {
	return func(h *harness) (outOutput, error) { h.now = h.now.Add(d); return outOutput{}, nil }
}

func wantStats(want ProducerStats) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		t.Helper()
		if got := h.p.stats(); got != want {
			t.Errorf("stats = %+v, want %+v", got, want)
		}
	}
}

func wantDemand(entities []string, buffered map[string]int) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		t.Helper()
		if got := h.p.entitiesWithDemand(); !reflect.DeepEqual(got, entities) {
			t.Errorf("entitiesWithDemand = %v, want %v", got, entities)
		}
		if got := h.p.bufferedForEntitiesWithoutDemand(); !reflect.DeepEqual(got, buffered) {
			t.Errorf("bufferedForEntitiesWithoutDemand = %v, want %v", got, buffered)
		}
	}
}

func wantResendFirst(want bool) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		t.Helper()
		if got := h.p.needsResendFirst(); got != want {
			t.Errorf("needsResendFirst = %v, want %v", got, want)
		}
	}
}

// checkStepOutput fails t unless a step's error and messages are as wanted.
func checkStepOutput(t *testing.T, where string, out outOutput, err, wantErr error, send, resend []string) {
	t.Helper()
	if wantErr != nil {
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: err = %v, want %v", where, err, wantErr)
		}
	} else if err != nil {
		t.Fatalf("%s: unexpected err %v", where, err)
	}
	if got := render(out.send); !reflect.DeepEqual(got, send) {
		t.Errorf("%s: send = %v, want %v", where, got, send)
	}
	if got := render(out.resend); !reflect.DeepEqual(got, resend) {
		t.Errorf("%s: resend = %v, want %v", where, got, resend)
	}
}

func runSteps(t *testing.T, settings producerSettings, steps []producerStep) *harness {
	t.Helper()
	h := newHarness(settings)
	for i, s := range steps {
		out, err := s.run(h)
		where := fmt.Sprintf("step %d (%s)", i, s.name)
		checkStepOutput(t, where, out, err, s.err, s.send, s.resend)
		if got := renderConfirmed(out.confirmed); !reflect.DeepEqual(got, s.confirmed) {
			t.Errorf("%s: confirmed = %v, want %v", where, got, s.confirmed)
		}
		if out.demandChanged != s.changed {
			t.Errorf("%s: demandChanged = %v, want %v", where, out.demandChanged, s.changed)
		}
		checkInvariants(t, where, h.p)
		if s.check != nil {
			s.check(t, h)
		}
	}
	return h
}

// checkInvariants fails t unless every out-state holds together and the
// shared counts match what the out-states hold.
func checkInvariants(t *testing.T, where string, p *producerState) {
	t.Helper()
	buffered, storing := 0, 0
	for _, o := range p.outs {
		if err := o.check(); err != nil {
			t.Fatalf("%s: invariant: %v", where, err)
		}
		buffered += len(o.buffered)
		storing += len(o.storing)
	}
	if buffered != p.buffered || storing != p.storing {
		t.Fatalf("%s: shared counts: %d buffered, %d storing; out-states hold %d, %d", where, p.buffered, p.storing, buffered, storing)
	}
}

func TestProducerStateSteps(t *testing.T) {
	tests := []struct {
		name     string
		settings producerSettings
		steps    []producerStep
	}{
		{
			name: "first message goes without demand, the second waits",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true,
					check: wantDemand(nil, map[string]int{})},
				{name: "second buffered", run: send("a"), changed: true,
					check: wantDemand(nil, map[string]int{"a": 1})},
				{name: "third buffered", run: send("a"), changed: true,
					check: wantStats(ProducerStats{Entities: 1, Unconfirmed: 1, Buffered: 2, Accepted: 3, Sent: 1})},
			},
		},
		{
			name: "request releases buffered messages in order up to the window",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "buffer 2", run: send("a"), changed: true},
				{name: "buffer 3", run: send("a"), changed: true},
				{name: "buffer 4", run: send("a"), changed: true},
				// confirming the first resends what is unconfirmed after it
				// (nothing here) and opens the window to 3
				{name: "window to 3", run: request("a", incA, 1, 3), send: []string{"a/2", "a/3"}, changed: true,
					check: wantDemand(nil, map[string]int{"a": 1})},
				{name: "window to 5", run: request("a", incA, 3, 5), send: []string{"a/4"}, changed: true,
					check: wantDemand([]string{"a"}, map[string]int{})},
				{name: "fifth goes at once", run: send("a"), send: []string{"a/5"}, changed: true,
					check: wantDemand(nil, map[string]int{})},
				{name: "sixth waits", run: send("a"), changed: true,
					check: wantStats(ProducerStats{Entities: 1, Unconfirmed: 2, Buffered: 1, Accepted: 6, Sent: 5, Confirmed: 3})},
			},
		},
		{
			// The consumer asks at first contact; what went on that demand
			// arrived after the first, and is not sent twice.
			name: "request that confirms the first after an earlier request resends nothing",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "window to 3", run: request("a", incA, 0, 3), changed: true},
				{name: "second", run: send("a"), send: []string{"a/2"}},
				{name: "third", run: send("a"), send: []string{"a/3"}, changed: true},
				{name: "confirm first", run: request("a", incA, 1, 3)},
			},
		},
		{
			name: "request via timeout resends all unconfirmed",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "confirm first", run: request("a", incA, 1, 4), changed: true},
				{name: "second", run: send("a"), send: []string{"a/2"}},
				{name: "third", run: send("a"), send: []string{"a/3"}},
				{name: "plain request", run: request("a", incA, 2, 4)},
				{name: "via timeout", run: requestWith(&messages.Request{EntityId: "a", ProducerIncarnation: incA,
					ConfirmedSeqNr: 2, RequestUpToSeqNr: 4, SupportResend: true, ViaTimeout: true}),
					resend: []string{"a/3"}},
				{name: "stats", run: advance(0),
					check: wantStats(ProducerStats{Entities: 1, Unconfirmed: 1, Accepted: 3, Sent: 3, Resent: 1, Confirmed: 2})},
			},
		},
		{
			name: "ack removes unconfirmed and confirms ack'ed messages",
			steps: []producerStep{
				{name: "first with ack", run: sendAck("a"), send: []string{"a/1*!"}, changed: true},
				{name: "window to 5", run: request("a", incA, 0, 5), changed: true},
				{name: "second", run: send("a"), send: []string{"a/2"}},
				{name: "third with ack", run: sendAck("a"), send: []string{"a/3!"}},
				{name: "ack 1 resends after the first", run: ack("a", incA, 1), confirmed: []string{"a/1"},
					resend: []string{"a/2", "a/3!"}},
				{name: "ack 3", run: ack("a", incA, 3), confirmed: []string{"a/3"},
					check: wantStats(ProducerStats{Entities: 1, Accepted: 3, Sent: 3, Resent: 2, Confirmed: 3})},
				{name: "stale ack is a no-op", run: ack("a", incA, 2)},
				{name: "ack beyond sent", run: ack("a", incA, 4), err: errSeqNrOutOfRange},
			},
		},
		{
			name: "resend from a seqNr, and from 0 with the head marked first",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "confirm first, window to 5", run: request("a", incA, 1, 5), changed: true},
				{name: "second", run: send("a"), send: []string{"a/2"}},
				{name: "third", run: send("a"), send: []string{"a/3"}},
				{name: "fourth", run: send("a"), send: []string{"a/4"}},
				{name: "resend from 3", run: resend("a", incA, 3), resend: []string{"a/3", "a/4"}},
				{name: "new entity incarnation", run: resend("a", incA, 0), resend: []string{"a/2*", "a/3", "a/4"}},
				{name: "head stays first", run: resend("a", incA, 2), resend: []string{"a/2*", "a/3", "a/4"}},
				{name: "resend beyond sent", run: resend("a", incA, 5), err: errSeqNrOutOfRange},
				{name: "negative", run: resend("a", incA, -1), err: errSeqNrOutOfRange},
			},
		},
		{
			name: "resend-first only while the first is unconfirmed",
			steps: []producerStep{
				{name: "nothing yet", run: firstTick, check: wantResendFirst(false)},
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true, check: wantResendFirst(true)},
				{name: "tick", run: firstTick, resend: []string{"a/1*"}},
				{name: "tick again", run: firstTick, resend: []string{"a/1*"}},
				{name: "grant without confirming", run: request("a", incA, 0, 2), changed: true},
				{name: "second", run: send("a"), send: []string{"a/2"}, changed: true},
				{name: "tick still resends only the first", run: firstTick, resend: []string{"a/1*"}},
				{name: "first confirmed", run: ack("a", incA, 1), resend: []string{"a/2"}, check: wantResendFirst(false)},
				{name: "tick after", run: firstTick},
			},
		},
		{
			name:     "idle tick resends the oldest unconfirmed after the idle timeout",
			settings: producerSettings{ResendFirstUnconfirmedIdleTimeout: 10 * time.Second},
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "window", run: request("a", incA, 1, 3), changed: true},
				{name: "second", run: send("a"), send: []string{"a/2"}},
				{name: "third", run: send("a"), send: []string{"a/3"}, changed: true},
				{name: "not idle yet", run: advance(9 * time.Second)},
				{name: "tick before timeout", run: idleTick},
				{name: "idle", run: advance(time.Second)},
				{name: "tick at timeout", run: idleTick, resend: []string{"a/2"}},
				{name: "confirm 2 is use", run: ack("a", incA, 2)},
				{name: "tick after use", run: idleTick},
			},
		},
		{
			name: "replies from a stale incarnation or an unknown entity are ignored",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "request of another incarnation", run: request("a", incB, 1, 10), err: errStaleIncarnation},
				{name: "ack of zero incarnation", run: ack("a", 0, 1), err: errStaleIncarnation},
				{name: "resend of another incarnation", run: resend("a", 7, 0), err: errStaleIncarnation},
				{name: "unknown entity", run: request("z", incA, 0, 10), err: errUnknownEntity},
				{name: "state unchanged", run: advance(0), check: wantStats(ProducerStats{Entities: 1, Unconfirmed: 1, Accepted: 1, Sent: 1})},
			},
		},
		{
			name: "invalid requests are refused and change nothing",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "confirmed beyond requested", run: request("a", incA, 3, 2), err: errInvalidRequest},
				{name: "negative confirmed", run: request("a", incA, -1, 2), err: errInvalidRequest},
				{name: "confirms more than sent", run: request("a", incA, 2, 5), err: errSeqNrOutOfRange},
				{name: "state unchanged", run: advance(0), check: wantStats(ProducerStats{Entities: 1, Unconfirmed: 1, Accepted: 1, Sent: 1})},
				{name: "valid one still works", run: request("a", incA, 1, 2), changed: true},
			},
		},
		{
			name: "a lower window never shrinks demand",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "window to 3", run: request("a", incA, 1, 3), changed: true},
				{name: "lower window", run: request("a", incA, 1, 2)},
				{name: "second", run: send("a"), send: []string{"a/2"}},
				{name: "third", run: send("a"), send: []string{"a/3"}, changed: true},
			},
		},
		{
			name: "only-flow-control keeps nothing and moves a spent window past what was sent",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "flow control only", run: requestWith(&messages.Request{EntityId: "a", ProducerIncarnation: incA,
					ConfirmedSeqNr: 0, RequestUpToSeqNr: 1}), changed: true,
					// upTo 1 <= next 2: expanded to 2 + (1 - 0) = 3
					check: wantStats(ProducerStats{Entities: 1, Accepted: 1, Sent: 1})},
				{name: "second", run: send("a"), send: []string{"a/2"}},
				{name: "third", run: send("a"), send: []string{"a/3"}, changed: true},
				{name: "resend has nothing", run: resend("a", incA, 0)},
				{name: "first tick has nothing", run: firstTick},
			},
		},
		{
			name:     "buffer is shared by all entities",
			settings: producerSettings{BufferSize: 2},
			steps: []producerStep{
				{name: "a first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "b first", run: send("b"), send: []string{"b/1*"}, changed: true},
				{name: "a buffered", run: send("a"), changed: true},
				{name: "b buffered", run: send("b"), changed: true,
					check: wantDemand(nil, map[string]int{"a": 1, "b": 1})},
				{name: "a full", run: send("a"), err: ErrBufferFull},
				{name: "b full", run: send("b"), err: ErrBufferFull},
				// a new entity's first message needs no buffer
				{name: "c first despite full", run: send("c"), send: []string{"c/1*"}, changed: true},
				{name: "c full", run: send("c"), err: ErrBufferFull,
					check: wantStats(ProducerStats{Entities: 3, Unconfirmed: 3, Buffered: 2, Accepted: 5, Sent: 3})},
				{name: "b demand frees a place", run: request("b", incB, 1, 2), send: []string{"b/2"}, changed: true,
					check: wantDemand(nil, map[string]int{"a": 1})},
				{name: "c buffered now", run: send("c"), changed: true},
				{name: "full again", run: send("b"), send: nil, err: ErrBufferFull},
				{name: "c demand", run: request("c", incC, 1, 5), send: []string{"c/2"}, changed: true,
					check: wantDemand([]string{"c"}, map[string]int{"a": 1})},
			},
		},
		{
			name:     "cleanup forgets only idle out-states with nothing unconfirmed or buffered",
			settings: producerSettings{CleanupUnusedAfter: time.Minute},
			steps: []producerStep{
				{name: "a first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "b first", run: send("b"), send: []string{"b/1*"}, changed: true},
				{name: "a confirmed", run: request("a", incA, 1, 5), changed: true},
				{name: "later", run: advance(59 * time.Second)},
				{name: "cleanup too early", run: cleanup()},
				{name: "idle", run: advance(time.Second)},
				{name: "cleanup a, b still unconfirmed", run: cleanup("a"),
					check: wantStats(ProducerStats{Entities: 1, Unconfirmed: 1, Accepted: 2, Sent: 2, Confirmed: 1})},
				{name: "old reply for a", run: request("a", incA, 1, 6), err: errUnknownEntity},
				{name: "a starts a new incarnation", run: send("a"), send: []string{"a/1*"}, changed: true,
					check: func(t *testing.T, h *harness) {
						if got := h.p.outs["a"].incarnation; got != incC {
							t.Errorf("incarnation = %d, want %d", got, incC)
						}
					}},
				{name: "reply of the old incarnation", run: request("a", incA, 1, 6), err: errStaleIncarnation},
			},
		},
		{
			name: "stop refuses new messages and lists what is undelivered",
			steps: []producerStep{
				{name: "first", run: send("a"), send: []string{"a/1*"}, changed: true},
				{name: "buffered", run: send("a"), changed: true},
				{name: "b first", run: send("b"), send: []string{"b/1*"}, changed: true},
				{name: "stop", run: func(h *harness) (outOutput, error) { h.p.stop(); return outOutput{}, nil },
					check: func(t *testing.T, h *harness) {
						if got, want := render(h.p.undelivered()), []string{"a/1*", "a/2", "b/1*"}; !reflect.DeepEqual(got, want) {
							t.Errorf("undelivered = %v, want %v", got, want)
						}
					}},
				{name: "refused", run: send("a"), err: ErrProducerStopped},
				{name: "still delivers", run: request("a", incA, 1, 2), send: []string{"a/2"}, changed: true},
			},
		},
		{
			name: "invalid messages are refused",
			steps: []producerStep{
				{name: "empty entity ID", run: send(""), err: errInvalidMessage},
				{name: "nil message", run: func(h *harness) (outOutput, error) {
					return h.p.accept(&sendRequest{entityID: "a", msg: nil, ack: false}, h.now)
				}, err: deadletter.ErrNilMessage, check: wantStats(ProducerStats{})},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.settings, tt.steps) })
	}
}

func TestProducerStateSequencedMessageFields(t *testing.T) {
	h := newHarness(producerSettings{})
	out, err := h.p.accept(&sendRequest{entityID: "e1", msg: &testpb.Ping{EntityId: "e1", Seq: 7}, ack: true}, h.now)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.send) != 1 {
		t.Fatalf("send = %v", render(out.send))
	}
	m := out.send[0]
	// As the controller sends it to an entity on this node.
	if short, err := h.p.forSending(m, false); short || err != nil {
		t.Fatalf("forSending = %v, %v; want the full form", short, err)
	}
	if m.GetEntityId() != "e1" || m.GetProducerId() != "prod" || m.GetProducerIncarnation() != incA ||
		m.GetSeqNr() != 1 || !m.GetFirst() || !m.GetAck() {
		t.Errorf("fields: %v", m)
	}
	if !proto.Equal(m.GetProducerController(), h.p.controller) {
		t.Errorf("producer_controller = %v, want %v", m.GetProducerController(), h.p.controller)
	}
	got, err := m.GetMessage().UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, &testpb.Ping{EntityId: "e1", Seq: 7}) {
		t.Errorf("payload = %v", got)
	}
}

func TestResendZeroDoesNotModifySentMessage(t *testing.T) {
	h := newHarness(producerSettings{})
	if _, err := h.p.accept(&sendRequest{entityID: "a", msg: &testpb.Ping{}, ack: false}, h.now); err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.onRequest(&messages.Request{EntityId: "a", ProducerIncarnation: incA, ConfirmedSeqNr: 1, RequestUpToSeqNr: 3, SupportResend: true}, h.now); err != nil {
		t.Fatal(err)
	}
	out, err := h.p.accept(&sendRequest{entityID: "a", msg: &testpb.Ping{}, ack: false}, h.now)
	if err != nil {
		t.Fatal(err)
	}
	sent := out.send[0]
	re, err := h.p.onResend(&messages.Resend{EntityId: "a", ProducerIncarnation: incA})
	if err != nil {
		t.Fatal(err)
	}
	if sent.GetFirst() {
		t.Error("Resend(0) set first on the message already sent")
	}
	if !re.resend[0].GetFirst() || re.resend[0].GetSeqNr() != 2 {
		t.Errorf("resend = %v, want [a/2*]", render(re.resend))
	}
}

func TestRandomIncarnation(t *testing.T) {
	h := &harness{p: newProducerState("prod", nil, producerSettings{}, nil), now: time.Unix(0, 0)}
	seen := map[uint64]bool{}
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := h.p.accept(&sendRequest{entityID: id, msg: &testpb.Ping{}, ack: false}, h.now); err != nil {
			t.Fatal(err)
		}
		inc := h.p.outs[id].incarnation
		if inc == 0 || seen[inc] {
			t.Fatalf("incarnation %d for %s (seen %v)", inc, id, seen)
		}
		seen[inc] = true
	}
}

func TestIncarnationSourceFailure(t *testing.T) {
	boom := errors.New("no entropy")
	for _, tc := range []struct {
		name string
		inc  func() (uint64, error)
	}{
		{"error", func() (uint64, error) { return 0, boom }},
		{"zero", func() (uint64, error) { return 0, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProducerState("prod", nil, producerSettings{}, tc.inc)
			if _, err := p.accept(&sendRequest{entityID: "a", msg: &testpb.Ping{}, ack: false}, time.Unix(0, 0)); err == nil {
				t.Fatal("accepted without an incarnation")
			}
			if s := p.stats(); s != (ProducerStats{}) {
				t.Errorf("stats = %+v, want zero", s)
			}
		})
	}
}

func TestProducerErrors(t *testing.T) {
	if !errors.Is(ErrBufferFull, deadletter.ErrBufferFull) {
		t.Error("ErrBufferFull does not wrap deadletter.ErrBufferFull")
	}
	if !errors.Is(ErrProducerStopped, deadletter.ErrShuttingDown) {
		t.Error("ErrProducerStopped does not wrap deadletter.ErrShuttingDown")
	}
}

func TestProducerSettingsDefaults(t *testing.T) {
	got := producerSettings{BufferSize: -1, CleanupUnusedAfter: time.Minute}.withDefaults()
	want := producerSettings{
		BufferSize:                        1000,
		CleanupUnusedAfter:                time.Minute,
		ResendFirstUnconfirmedIdleTimeout: 10 * time.Second,
		ResendFirstInterval:               time.Second,
		DurableQueueRequestTimeout:        3 * time.Second,
		DurableQueueRetryAttempts:         10,
		MaxMessageSize:                    guard.DefaultMaxMessageSize,
	}
	if got != want {
		t.Errorf("withDefaults = %+v, want %+v", got, want)
	}
}

// TestProducerRefusesWhatCannotArrive: a message whose SequencedMessage (in
// its envelope) exceeds MaxMessageSize is refused before it is numbered;
// one that fits is taken; nothing of the refused one stays.
func TestProducerRefusesWhatCannotArrive(t *testing.T) {
	h := newHarness(producerSettings{MaxMessageSize: 4 << 10})
	_, err := h.p.accept(&sendRequest{entityID: "a", msg: &testpb.Ping{From: strings.Repeat("x", 4<<10)}}, h.now)
	if !errors.Is(err, ErrMessageTooLarge) || !errors.Is(err, deadletter.ErrMessageTooLarge) {
		t.Fatalf("accept over MaxMessageSize: %v, want ErrMessageTooLarge", err)
	}
	if st := h.p.stats(); st.Entities != 0 || st.Accepted != 0 {
		t.Fatalf("after the refusal: %+v, want nothing", st)
	}
	out, err := h.p.accept(&sendRequest{entityID: "a", msg: &testpb.Ping{From: strings.Repeat("x", 2<<10)}}, h.now)
	if err != nil || !reflect.DeepEqual(render(out.send), []string{"a/1*"}) {
		t.Fatalf("accept within MaxMessageSize: %v, %v; want a/1 sent, first", render(out.send), err)
	}
}

// TestMessageLimitsSizes: the sizes added up from the fields are the
// encoded sizes of the largest SequencedMessage and MessageSent, which the
// limits must bound.
func TestMessageLimitsSizes(t *testing.T) {
	pid := actor.NewPID("127.0.0.1:8090", "delivery/Type/producer-1")
	for _, tc := range []struct {
		entityID string
		msg      proto.Message
	}{
		{"a", &testpb.Ping{}},
		{"e-17", &testpb.Ping{EntityId: "e-17", Seq: 42}},
		{strings.Repeat("x", 200), &testpb.Ping{From: strings.Repeat("y", 300)}},
		{"big", &testpb.Ping{From: strings.Repeat("z", 70_000)}},
	} {
		t.Run(fmt.Sprintf("%.10s", tc.entityID), func(t *testing.T) {
			l := newMessageLimits("producer-1", pid, math.MaxInt, math.MaxInt)
			payload, err := l.pack(tc.entityID, tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			sent := &messages.SequencedMessage{EntityId: tc.entityID, ProducerId: "producer-1", ProducerIncarnation: math.MaxUint64,
				SeqNr: math.MaxInt64, First: true, Ack: true, ProducerController: pid, Message: payload.any()}
			if got, want := payload.anySize(), proto.Size(payload.any()); got != want {
				t.Errorf("anySize = %d, want %d", got, want)
			}
			if got, want := l.sequencedSize(tc.entityID, payload), proto.Size(sent); got != want {
				t.Errorf("sequencedSize = %d, want %d", got, want)
			}
			stored := &messages.MessageSent{EntityId: tc.entityID, ProducerIncarnation: math.MaxUint64, SeqNr: math.MaxInt64,
				Ack: true, TimestampMs: math.MaxInt64, Message: payload.any()}
			if got, want := l.storedSize(tc.entityID, payload), proto.Size(stored); got != want {
				t.Errorf("storedSize = %d, want %d", got, want)
			}
		})
	}
}

func TestDropFront(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       []int
		n       int
		want    []int
		cleared int // slots of the array cleared behind the result
	}{
		{"nothing", []int{1, 2, 3}, 0, []int{1, 2, 3}, 0},
		{"less than half: resliced", []int{1, 2, 3, 4, 5}, 2, []int{3, 4, 5}, 2},
		{"half: moved to the front", []int{1, 2, 3, 4}, 2, []int{3, 4}, 2},
		{"all", []int{1, 2, 3}, 3, []int{}, 3},
		{"more than all", []int{1, 2}, 5, []int{}, 2},
		{"empty", nil, 1, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			array := slices.Clone(tc.s)
			got := dropFront(array, tc.n)
			if !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("dropFront(%v, %d) = %v, want %v", tc.s, tc.n, got, tc.want)
			}
			zeros := 0
			for _, v := range array {
				if v == 0 {
					zeros++
				}
			}
			if zeros != tc.cleared {
				t.Fatalf("the array after dropFront: %v, want %d slots cleared", array, tc.cleared)
			}
		})
	}
}

// TestOutStateReusesItsArrays: in a steady flow, window after window,
// an entity's out-state sends and confirms without growing new arrays:
// the only allocations are the messages and the outputs.
func TestOutStateReusesItsArrays(t *testing.T) {
	o := newOutState("a", "p", actor.NewPID("nonhost", "p"), 1, time.Unix(0, 0))
	payload := packed{url: "type.googleapis.com/protoshard.testpb.Ping"}
	if _, err := o.onRequest(&messages.Request{RequestUpToSeqNr: 50, SupportResend: true}, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	// The consumer confirms each half window while the next is on its way.
	window := func() {
		for range 25 {
			o.accept(payload, false, time.Unix(0, 0))
		}
		sent := o.sentSeqNr()
		if _, err := o.onRequest(&messages.Request{ConfirmedSeqNr: sent - 25, RequestUpToSeqNr: sent + 50, SupportResend: true}, time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		window()
	}
	// Per message: its SequencedMessage, the short form it is sent in,
	// and the output's send slice. (AllocsPerRun truncates its average:
	// ten windows a run.)
	allocs := testing.AllocsPerRun(20, func() {
		for range 10 {
			window()
		}
	})
	if allocs > 750 {
		t.Fatalf("%.0f allocations per 10 windows of 25 messages, want at most 750", allocs)
	}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
}

// TestPackIsAnypbNew: pack's Any, with its cached type URL, is anypb.New's,
// whichever type the producer packed before.
func TestPackIsAnypbNew(t *testing.T) {
	l := newMessageLimits("p", actor.NewPID("nonhost", "p"), math.MaxInt, 0)
	for i, m := range []proto.Message{&testpb.Ping{Seq: 1}, &testpb.Ping{Seq: 2}, &testpb.Pong{Seq: 3}, &testpb.Ping{Seq: 4}} {
		p, err := l.pack("a", m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := anypb.New(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.any(); !proto.Equal(got, want) {
			t.Fatalf("message %d: pack = %v, want %v", i, got, want)
		}
	}
}

// TestPackAllocatesTheEncodingOnly: pack allocates the message's
// encoding and nothing else (an Any is made only for the full form).
func TestPackAllocatesTheEncodingOnly(t *testing.T) {
	l := newMessageLimits("p", actor.NewPID("nonhost", "p"), math.MaxInt, 0)
	msg := &testpb.Ping{EntityId: "a", Seq: 1}
	if _, err := l.pack("a", msg); err != nil { // the type URL is cached
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = l.pack("a", msg) }); n != 1 {
		t.Fatalf("pack allocates %v times, want 1 (the encoding)", n)
	}
}

// TestAcceptNumbersInTheShellSendMade: a queued Send's message is
// numbered in the SequencedMessage its sender allocated, not in one the
// controller allocates.
func TestAcceptNumbersInTheShellSendMade(t *testing.T) {
	h := newHarness(producerSettings{})
	payload, err := h.p.limits.pack("a", &testpb.Ping{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	shell := &messages.SequencedMessage{}
	payload.shell = shell
	out, err := h.p.acceptQueued(queuedSend{entityID: "a", msg: &testpb.Ping{Seq: 1}, payload: payload}, h.now)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.send) != 1 || out.send[0] != shell || out.accepted != shell {
		t.Fatalf("send %v, accepted %p; want the shell %p sent", render(out.send), out.accepted, shell)
	}
	if shell.GetEntityId() != "a" || shell.GetSeqNr() != 1 || !shell.GetFirst() || shell.GetTypeId() != 1 {
		t.Fatalf("shell numbered as %v", shell)
	}
}

// TestShortForm: a message goes in short form (no type URL, no producer
// PID) only once its entity said it reads the short form and takes
// resends, and had the type named in full form; a Resend names the types
// again; resends go in full form.
func TestShortForm(t *testing.T) {
	h := newHarness(producerSettings{})
	accept := func(msg proto.Message) *messages.SequencedMessage {
		t.Helper()
		out, err := h.p.accept(&sendRequest{entityID: "a", msg: msg}, h.now)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.send) != 1 {
			t.Fatalf("send = %v, want one message", render(out.send))
		}
		return out.send[0]
	}
	request := func(confirmed, upTo int64, resend, short bool) {
		t.Helper()
		if _, err := h.p.onRequest(&messages.Request{EntityId: "a", ProducerIncarnation: incA,
			ConfirmedSeqNr: confirmed, RequestUpToSeqNr: upTo, SupportResend: resend, ShortForm: short}, h.now); err != nil {
			t.Fatal(err)
		}
	}
	// sentFull is each message as accepted, in full form, by seqNr.
	sentFull := map[int64]*messages.SequencedMessage{}
	note := func(m *messages.SequencedMessage, msg proto.Message, typeID uint32) {
		t.Helper()
		payload, err := anypb.New(msg)
		if err != nil {
			t.Fatal(err)
		}
		sentFull[m.GetSeqNr()] = &messages.SequencedMessage{EntityId: "a", ProducerId: "prod", ProducerIncarnation: incA,
			SeqNr: m.GetSeqNr(), First: m.GetFirst(), ProducerController: h.p.controller, Message: payload, TypeId: typeID}
	}
	full := func(step string, msg proto.Message, typeID uint32) *messages.SequencedMessage {
		t.Helper()
		m := accept(msg)
		note(m, msg, typeID)
		if short, err := h.p.forSending(m, true); short || err != nil {
			t.Fatalf("%s: short form %v (%v), want the full form", step, m, err)
		}
		if !proto.Equal(m, sentFull[m.GetSeqNr()]) {
			t.Fatalf("%s: %v, want the full form %v", step, m, sentFull[m.GetSeqNr()])
		}
		return m
	}
	short := func(step string, msg proto.Message, typeID uint32) *messages.SequencedMessage {
		t.Helper()
		m := accept(msg)
		note(m, msg, typeID)
		if short, err := h.p.forSending(m, true); !short || err != nil {
			t.Fatalf("%s: no short form of %v (%v)", step, m, err)
		}
		want := &messages.SequencedMessage{EntityId: "a", ProducerId: "prod", ProducerIncarnation: incA,
			SeqNr: m.GetSeqNr(), TypeId: typeID, Payload: sentFull[m.GetSeqNr()].GetMessage().GetValue()}
		if !proto.Equal(m, want) {
			t.Fatalf("%s: short form %v, want %v", step, m, want)
		}
		return m
	}
	full("first message", &testpb.Ping{Seq: 1}, 1)
	request(0, 20, true, false)
	full("Ping to a consumer that does not read the short form", &testpb.Ping{Seq: 2}, 1)
	request(0, 20, true, true)
	m3 := short("Ping, named", &testpb.Ping{Seq: 3}, 1)
	sentShort := proto.Clone(m3).(*messages.SequencedMessage)
	full("Pong, a new type", &testpb.Pong{Seq: 4}, 2)
	short("Pong, named", &testpb.Pong{Seq: 5}, 2)
	short("Ping again", &testpb.Ping{Seq: 6}, 1)
	re, err := h.p.onResend(&messages.Resend{EntityId: "a", ProducerIncarnation: incA, FromSeqNr: 5})
	if err != nil {
		t.Fatal(err)
	}
	// What went in short form is resent in its full form again.
	if got := render(re.resend); !reflect.DeepEqual(got, []string{"a/5", "a/6"}) {
		t.Fatalf("resent %v, want a/5 and a/6", got)
	}
	for _, m := range re.resend {
		if want := sentFull[m.GetSeqNr()]; !proto.Equal(m, want) {
			t.Fatalf("resent %v, want its full form %v", m, want)
		}
	}
	full("Ping after a Resend", &testpb.Ping{Seq: 7}, 1)
	short("Ping named again", &testpb.Ping{Seq: 8}, 1)

	// A Resend from 0 marks the head first, a short form included; what
	// was handed to the actor stays as it was.
	request(2, 20, true, true)
	re, err = h.p.onResend(&messages.Resend{EntityId: "a", ProducerIncarnation: incA, FromSeqNr: 0})
	if err != nil {
		t.Fatal(err)
	}
	if got := render(re.resend); !reflect.DeepEqual(got, []string{"a/3*", "a/4", "a/5", "a/6", "a/7", "a/8"}) {
		t.Fatalf("resent %v, want a/3* to a/8", got)
	}
	headFirst := proto.Clone(sentFull[3]).(*messages.SequencedMessage)
	headFirst.First = true
	if !proto.Equal(re.resend[0], headFirst) {
		t.Fatalf("resent head %v, want %v", re.resend[0], headFirst)
	}
	if !proto.Equal(m3, sentShort) {
		t.Fatalf("the short form sent changed to %v", m3)
	}
	undelivered := h.p.undelivered()
	for i, m := range undelivered {
		want := sentFull[m.GetSeqNr()]
		if i == 0 {
			want = headFirst
		}
		if !proto.Equal(m, want) {
			t.Fatalf("undelivered %v, want its full form %v", m, want)
		}
	}
	if len(undelivered) != 6 {
		t.Fatalf("undelivered %v, want a/3 to a/8", render(undelivered))
	}
	request(2, 20, false, true)
	full("Ping to an only-flow-control entity", &testpb.Ping{Seq: 9}, 1)
}
