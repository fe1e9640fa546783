package delivery

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
)

var errStoreBoom = errors.New("disk on fire")

// storeHarness drives a producerState with a durable queue as the actor
// does: after each step it begins the next write, if one is due.
type storeHarness struct {
	*harness
	labels map[*sendRequest]string // each Send's message, "entity/seq"
}

// storeStep is one input and everything it must produce: messages sent,
// Sends answered (stored), the write begun after it ("" none), and the
// error the pipeline failed with, with the Sends it never stored.
type storeStep struct {
	name     string
	run      func(h *storeHarness) (outOutput, storeOutput, error)
	send     []string
	resend   []string
	stored   []string
	write    string
	err      error // of the step itself (errors.Is)
	failed   error // the pipeline's (errors.Is)
	unstored []string
	check    func(t *testing.T, h *storeHarness)
}

func dsend(entity string) func(*storeHarness) (outOutput, storeOutput, error) {
	return func(h *storeHarness) (outOutput, storeOutput, error) {
		h.n++
		r := &sendRequest{entityID: entity, msg: &testpb.Ping{EntityId: entity, Seq: h.n}, done: make(chan error, 1)}
		out, err := h.p.accept(r, h.now)
		if err == nil {
			h.labels[r] = fmt.Sprintf("%s/%d", entity, h.p.outs[entity].currentSeqNr-1)
		}
		return out, storeOutput{}, err
	}
}

// complete ends the write in flight: parts lists those it wrote ("cleanup",
// "sent", "confirmed"), err is the error of the next part.
func complete(err error, parts ...string) func(*storeHarness) (outOutput, storeOutput, error) {
	return func(h *storeHarness) (outOutput, storeOutput, error) {
		r := storeResult{write: h.p.store.flight, err: err}
		for _, p := range parts {
			switch p {
			case "cleanup":
				r.cleanupDone = true
			case "sent":
				r.sentDone = true
			case "confirmed":
				r.confirmedDone = true
			}
		}
		so, serr := h.p.onStored(r, h.now)
		return so.out, so, serr
	}
}

// completeAll ends the write in flight with every part written.
func completeAll(h *storeHarness) (outOutput, storeOutput, error) {
	return complete(nil, "cleanup", "sent", "confirmed")(h)
}

func plain(f func(*harness) (outOutput, error)) func(*storeHarness) (outOutput, storeOutput, error) {
	return func(h *storeHarness) (outOutput, storeOutput, error) {
		out, err := f(h.harness)
		return out, storeOutput{}, err
	}
}

func loadQueue(st *messages.DurableProducerQueueState) func(*storeHarness) (outOutput, storeOutput, error) {
	return func(h *storeHarness) (outOutput, storeOutput, error) {
		out, err := h.p.load(st, h.now)
		return out, storeOutput{}, err
	}
}

func queued(entity string, inc uint64, seq int64) *messages.MessageSent {
	a, _ := anypb.New(&testpb.Ping{EntityId: entity, Seq: seq})
	return &messages.MessageSent{EntityId: entity, ProducerIncarnation: inc, SeqNr: seq, Message: a}
}

func renderWrite(w *storeWrite) string {
	if w == nil {
		return ""
	}
	var parts []string
	if len(w.cleanup) > 0 && !w.cleanupDone {
		parts = append(parts, fmt.Sprintf("cleanup%v", w.cleanup))
	}
	if len(w.sent) > 0 && !w.sentDone {
		var s []string
		for _, m := range w.sent {
			s = append(s, fmt.Sprintf("%s/%d", m.GetEntityId(), m.GetSeqNr()))
		}
		parts = append(parts, fmt.Sprintf("sent%v", s))
	}
	if len(w.confirmed) > 0 && !w.confirmedDone {
		var s []string
		for _, c := range w.confirmed {
			s = append(s, fmt.Sprintf("%s/%d", c.GetEntityId(), c.GetSeqNr()))
		}
		parts = append(parts, fmt.Sprintf("confirmed%v", s))
	}
	if w.attempt > 1 {
		parts = append(parts, fmt.Sprintf("try %d", w.attempt))
	}
	return strings.Join(parts, " ")
}

func (h *storeHarness) render(rs []*sendRequest) []string {
	var out []string
	for _, r := range rs {
		out = append(out, h.labels[r])
	}
	return out
}

func runStoreSteps(t *testing.T, settings producerSettings, steps []storeStep) *storeHarness {
	t.Helper()
	if settings.DurableQueue == nil {
		settings.DurableQueue = newMemoryQueue()
	}
	h := &storeHarness{harness: newHarness(settings), labels: map[*sendRequest]string{}}
	for i, s := range steps {
		where := fmt.Sprintf("step %d (%s)", i, s.name)
		out, so, err := s.run(h)
		checkStepOutput(t, where, out, err, s.err, s.send, s.resend)
		if got := h.render(so.stored); !reflect.DeepEqual(got, s.stored) {
			t.Errorf("%s: stored = %v, want %v", where, got, s.stored)
		}
		if s.failed == nil && so.failed != nil || s.failed != nil && !errors.Is(so.failed, s.failed) {
			t.Errorf("%s: failed = %v, want %v", where, so.failed, s.failed)
		}
		if got := h.render(so.unstored); !reflect.DeepEqual(got, s.unstored) {
			t.Errorf("%s: unstored = %v, want %v", where, got, s.unstored)
		}
		if got := renderWrite(h.p.store.begin(h.now)); got != s.write {
			t.Errorf("%s: write begun = %q, want %q", where, got, s.write)
		}
		checkInvariants(t, where, h.p)
		if s.check != nil {
			s.check(t, h)
		}
	}
	return h
}

func TestProducerStoreSteps(t *testing.T) {
	tests := []struct {
		name     string
		settings producerSettings
		steps    []storeStep
	}{
		{
			name: "a message is sent once stored, and batches grow while a write runs",
			steps: []storeStep{
				{name: "a1", run: dsend("a"), write: "sent[a/1]"},
				{name: "a2 waits for the write in flight", run: dsend("a")},
				{name: "b1", run: dsend("b")},
				{name: "stored", run: completeAll, send: []string{"a/1*"}, stored: []string{"a/1"}, write: "sent[a/2 b/1]"},
				{name: "a2 waits for demand", run: completeAll, send: []string{"b/1*"}, stored: []string{"a/2", "b/1"},
					check: func(t *testing.T, h *storeHarness) {
						wantStats(ProducerStats{Entities: 2, Unconfirmed: 2, Buffered: 1, Accepted: 3, Sent: 2})(t, h.harness)
					}},
				{name: "demand releases it", run: plain(request("a", incA, 1, 4)), send: []string{"a/2"}, write: "confirmed[a/1]"},
			},
		},
		{
			name: "confirmations are written behind, the highest per entity",
			steps: []storeStep{
				{name: "a1", run: dsend("a"), write: "sent[a/1]"},
				{name: "stored", run: completeAll, send: []string{"a/1*"}, stored: []string{"a/1"}},
				{name: "window", run: plain(request("a", incA, 0, 5)), write: ""},
				{name: "a2", run: dsend("a"), write: "sent[a/2]"},
				{name: "a3", run: dsend("a")},
				{name: "a2 stored", run: completeAll, send: []string{"a/2"}, stored: []string{"a/2"}, write: "sent[a/3]"},
				{name: "confirm 1", run: plain(request("a", incA, 1, 5))},
				{name: "confirm 2", run: plain(ack("a", incA, 2))},
				{name: "with the messages", run: completeAll, send: []string{"a/3"}, stored: []string{"a/3"}, write: "confirmed[a/2]"},
				{name: "written", run: completeAll},
			},
		},
		{
			name:     "a failing write is retried as it was, then the queue failed",
			settings: producerSettings{DurableQueueRetryAttempts: 3},
			steps: []storeStep{
				{name: "a1", run: dsend("a"), write: "sent[a/1]"},
				{name: "b1 waits", run: dsend("b")},
				{name: "fails", run: complete(errStoreBoom), write: "sent[a/1] try 2",
					check: func(t *testing.T, h *storeHarness) {
						if d := h.p.store.flight.delay; d < 100*time.Millisecond || d > 3*time.Second {
							t.Errorf("retry delay %v", d)
						}
					}},
				{name: "fails again", run: complete(errStoreBoom), write: "sent[a/1] try 3"},
				{name: "gives up", run: complete(errStoreBoom), failed: ErrQueueFailed, unstored: []string{"a/1", "b/1"}},
				{name: "refused after", run: dsend("c"), err: ErrQueueFailed},
			},
		},
		{
			name: "a fenced queue is not retried",
			steps: []storeStep{
				{name: "a1", run: dsend("a"), write: "sent[a/1]"},
				{name: "fenced", run: complete(fmt.Errorf("owner changed: %w", ErrQueueFenced)), failed: ErrQueueFenced, unstored: []string{"a/1"}},
			},
		},
		{
			name: "a retry skips the parts written; their Sends are answered at once",
			steps: []storeStep{
				{name: "a1", run: dsend("a"), write: "sent[a/1]"},
				{name: "b1", run: dsend("b")},
				{name: "a1 stored", run: completeAll, send: []string{"a/1*"}, stored: []string{"a/1"}, write: "sent[b/1]"},
				{name: "b1 stored", run: completeAll, send: []string{"b/1*"}, stored: []string{"b/1"}},
				{name: "a's window", run: plain(request("a", incA, 1, 5)), write: "confirmed[a/1]"},
				{name: "a2", run: dsend("a")},
				{name: "b's window", run: plain(request("b", incB, 1, 5))},
				{name: "a's written", run: completeAll, write: "sent[a/2] confirmed[b/1]"},
				{name: "messages stored, confirmations not", run: complete(errStoreBoom, "sent"), send: []string{"a/2"}, stored: []string{"a/2"},
					write: "confirmed[b/1] try 2"},
				{name: "retry written", run: completeAll},
			},
		},
		{
			name: "loaded: each numbering continues, the head goes out first, the rest wait for demand",
			steps: []storeStep{
				{name: "load", run: loadQueue(&messages.DurableProducerQueueState{
					Entities: []*messages.DurableProducerQueueEntity{
						{EntityId: "e1", ProducerIncarnation: 7, ConfirmedSeqNr: 2},
						{EntityId: "e2", ProducerIncarnation: 8, ConfirmedSeqNr: 4},
					},
					Unconfirmed: []*messages.MessageSent{queued("e1", 7, 3), queued("e1", 7, 4), queued("e1", 7, 5)},
				}), send: []string{"e1/3*"}, check: func(t *testing.T, h *storeHarness) {
					wantStats(ProducerStats{Entities: 2, Unconfirmed: 1, Buffered: 2, Sent: 1})(t, h.harness)
					wantResendFirst(true)(t, h.harness)
				}},
				{name: "new message for e2 continues its numbering", run: dsend("e2"), write: "sent[e2/5]"},
				{name: "e2 stored", run: completeAll, send: []string{"e2/5*"}, stored: []string{"e2/5"}},
				{name: "e1 head resent", run: plain(firstTick), resend: []string{"e1/3*", "e2/5*"}},
				{name: "e1 asks", run: plain(request("e1", 7, 3, 10)), send: []string{"e1/4", "e1/5"}, write: "confirmed[e1/3]"},
			},
		},
		{
			name: "loaded: the entity confirms what the earlier producer sent and this one did not",
			steps: []storeStep{
				{name: "load", run: loadQueue(&messages.DurableProducerQueueState{
					Entities:    []*messages.DurableProducerQueueEntity{{EntityId: "e1", ProducerIncarnation: 7, ConfirmedSeqNr: 2}},
					Unconfirmed: []*messages.MessageSent{queued("e1", 7, 3), queued("e1", 7, 4), queued("e1", 7, 5)},
				}), send: []string{"e1/3*"}},
				{name: "restored progress at 4", run: plain(request("e1", 7, 4, 12)), send: []string{"e1/5"}, write: "confirmed[e1/4]",
					check: func(t *testing.T, h *storeHarness) {
						wantStats(ProducerStats{Entities: 1, Unconfirmed: 1, Sent: 2, Confirmed: 2})(t, h.harness)
					}},
				{name: "beyond what was stored", run: plain(request("e1", 7, 6, 12)), err: errSeqNrOutOfRange},
			},
		},
		{
			name:     "an idle entity is cleaned up before a new numbering of it is stored",
			settings: producerSettings{CleanupUnusedAfter: time.Minute},
			steps: []storeStep{
				{name: "a1", run: dsend("a"), write: "sent[a/1]"},
				{name: "stored", run: completeAll, send: []string{"a/1*"}, stored: []string{"a/1"}},
				{name: "confirmed", run: plain(request("a", incA, 1, 5)), write: "confirmed[a/1]"},
				{name: "written", run: completeAll},
				{name: "idle", run: plain(advance(2 * time.Minute))},
				{name: "cleanup", run: plain(cleanup("a")), write: "cleanup[a]"},
				{name: "new numbering", run: dsend("a"), check: func(t *testing.T, h *storeHarness) {
					if inc := h.p.outs["a"].incarnation; inc != incB {
						t.Errorf("incarnation %d, want %d", inc, incB)
					}
				}},
				{name: "cleanup written", run: completeAll, write: "sent[a/1]"},
				{name: "stored", run: completeAll, send: []string{"a/1*"}, stored: []string{"a/1"}},
			},
		},
		{
			name:     "the buffer bound counts messages on their way to the queue",
			settings: producerSettings{BufferSize: 2},
			steps: []storeStep{
				{name: "a1 has demand", run: dsend("a"), write: "sent[a/1]"},
				{name: "a2 waits for demand", run: dsend("a")},
				{name: "full: a1 and a2 are on their way", run: dsend("a"), err: ErrBufferFull},
				{name: "another entity has demand", run: dsend("b")},
			},
		},
		{
			name: "stopping refuses Sends; what is on its way is still stored",
			steps: []storeStep{
				{name: "a1", run: dsend("a"), write: "sent[a/1]"},
				{name: "a2", run: dsend("a")},
				{name: "stop", run: func(h *storeHarness) (outOutput, storeOutput, error) {
					h.p.stop()
					return outOutput{}, storeOutput{}, nil
				}},
				{name: "refused", run: dsend("b"), err: ErrProducerStopped},
				{name: "stored", run: completeAll, send: []string{"a/1*"}, stored: []string{"a/1"}, write: "sent[a/2]"},
				{name: "stored too", run: completeAll, stored: []string{"a/2"}, check: func(t *testing.T, h *storeHarness) {
					if !h.p.store.idle() {
						t.Error("writes left after the last")
					}
				}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runStoreSteps(t, tt.settings, tt.steps) })
	}
}

// limitedQueue is a queue with a size limit of its own.
type limitedQueue struct {
	*memoryQueue
	limit int
}

func (q limitedQueue) MaxMessageSentBytes() int { return q.limit }

func TestProducerRefusesWhatTheQueueCannotStore(t *testing.T) {
	h := newHarness(producerSettings{DurableQueue: limitedQueue{memoryQueue: newMemoryQueue(), limit: 200}})
	if _, err := h.p.accept(&sendRequest{entityID: "a", msg: &testpb.Ping{From: strings.Repeat("x", 200)}}, h.now); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("accept over the limit: %v, want ErrMessageTooLarge", err)
	}
	if len(h.p.outs) != 0 || h.p.store.begin(h.now) != nil {
		t.Fatal("a refused message was numbered or queued")
	}
	if _, err := h.p.accept(&sendRequest{entityID: "a", msg: &testpb.Ping{From: strings.Repeat("x", 100)}}, h.now); err != nil {
		t.Fatalf("accept within the limit: %v", err)
	}
	if w := h.p.store.begin(h.now); w == nil || len(w.sent) != 1 || w.sent[0].GetSeqNr() != 1 {
		t.Fatalf("write %v, want a/1", renderWrite(w))
	}
}

// A loaded state that does not hold together is refused.
func TestProducerLoadRefusesABrokenState(t *testing.T) {
	for name, st := range map[string]*messages.DurableProducerQueueState{
		"gap": {Entities: []*messages.DurableProducerQueueEntity{{EntityId: "e", ProducerIncarnation: 1, ConfirmedSeqNr: 1}},
			Unconfirmed: []*messages.MessageSent{queued("e", 1, 3)}},
		"no entity": {Unconfirmed: []*messages.MessageSent{queued("e", 1, 1)}},
		"other incarnation": {Entities: []*messages.DurableProducerQueueEntity{{EntityId: "e", ProducerIncarnation: 1}},
			Unconfirmed: []*messages.MessageSent{queued("e", 2, 1)}},
		"entity twice":   {Entities: []*messages.DurableProducerQueueEntity{{EntityId: "e", ProducerIncarnation: 1}, {EntityId: "e", ProducerIncarnation: 1}}},
		"no incarnation": {Entities: []*messages.DurableProducerQueueEntity{{EntityId: "e"}}},
	} {
		h := newHarness(producerSettings{DurableQueue: newMemoryQueue()})
		if _, err := h.p.load(st, h.now); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
