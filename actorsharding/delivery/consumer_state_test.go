package delivery

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/messages"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func pcPID(inc uint64) *actor.PID { return actor.NewPID("node:1", fmt.Sprintf("pc%d", inc)) }

// seqMsg is producer "p"'s message seq of incarnation inc; flags: "first",
// "ack", or "producer=q".
func seqMsg(inc uint64, seq int64, flags ...string) *messages.SequencedMessage {
	m := &messages.SequencedMessage{
		EntityId: "e1", ProducerId: "p", ProducerIncarnation: inc, SeqNr: seq,
		ProducerController: pcPID(inc),
	}
	for _, f := range flags {
		switch {
		case f == "first":
			m.First = true
		case f == "ack":
			m.Ack = true
		case f == "nocontroller":
			m.ProducerController = nil
		case f == "ping":
			// Full form, naming testpb.Ping type ID 1.
			m.Message, _ = anypb.New(&testpb.Ping{Seq: seq})
			m.TypeId = 1
		case f == "short":
			// Short form of type ID 1: no PID, no Any (see fromSender).
			m.ProducerController = nil
			m.TypeId = 1
			m.Payload, _ = proto.Marshal(&testpb.Ping{Seq: seq})
		case strings.HasPrefix(f, "producer="):
			m.ProducerId = strings.TrimPrefix(f, "producer=")
		}
	}
	return m
}

type confirm struct {
	producer string
	seq      int64
}

type retry struct{}

// fromSender is m as the remote hands it over with its sender.
type fromSender struct {
	m    *messages.SequencedMessage
	from *actor.PID
}

type forget struct{ after time.Duration }

// summary renders an output as "deliver inc:seq; request inc:confirmed-upTo
// [timeout]@to; resend inc:from@to; ack inc:seq@to; drop inc:seq reason".
func summary(o consumerOutput) string {
	var parts []string
	to := ""
	if o.to != nil {
		to = "@" + o.to.Id
	}
	if o.deliver != nil {
		s := fmt.Sprintf("deliver %s%d:%d", producerPrefix(o.deliver.GetProducerId()),
			o.deliver.GetProducerIncarnation(), o.deliver.GetSeqNr())
		if o.deliver.GetMessage() == nil && o.deliver.GetTypeId() != 0 {
			s += " short"
			if o.payloadType != nil {
				s += " " + string(o.payloadType.Descriptor().FullName())
			}
		}
		parts = append(parts, s)
	}
	if r := o.request; r != nil {
		s := fmt.Sprintf("request %d:%d-%d", r.GetProducerIncarnation(), r.GetConfirmedSeqNr(), r.GetRequestUpToSeqNr())
		if r.GetViaTimeout() {
			s += " timeout"
		}
		if !r.GetSupportResend() {
			s += " noresend"
		}
		if r.GetEntityId() != "e1" {
			s += " entity=" + r.GetEntityId()
		}
		parts = append(parts, s+to)
	}
	if r := o.resend; r != nil {
		parts = append(parts, fmt.Sprintf("resend %d:%d%s", r.GetProducerIncarnation(), r.GetFromSeqNr(), to))
	}
	if a := o.ack; a != nil {
		parts = append(parts, fmt.Sprintf("ack %d:%d%s", a.GetProducerIncarnation(), a.GetConfirmedSeqNr(), to))
	}
	for _, d := range o.drops {
		reason := "?"
		for _, e := range []struct {
			err  error
			name string
		}{{errDuplicate, "duplicate"}, {ErrUnexpectedProducer, "unexpected"}, {errOutOfOrder, "outoforder"}, {ErrStashFull, "stashfull"}, {ErrNoProducerController, "nocontroller"}} {
			if errors.Is(d.err, e.err) {
				reason = e.name
			}
		}
		parts = append(parts, fmt.Sprintf("drop %s%d:%d %s", producerPrefix(d.msg.GetProducerId()),
			d.msg.GetProducerIncarnation(), d.msg.GetSeqNr(), reason))
	}
	return strings.Join(parts, "; ")
}

func producerPrefix(id string) string {
	if id == "p" {
		return ""
	}
	return id + "/"
}

type step struct {
	in   any
	want string
}

// run drives c step by step, one second apart, checking each output.
func run(t *testing.T, c *consumers, steps []step) {
	t.Helper()
	now := t0
	for i, st := range steps {
		now = now.Add(time.Second)
		var got string
		switch in := st.in.(type) {
		case *messages.SequencedMessage:
			got = summary(c.onSequenced(in, nil, now))
		case fromSender:
			got = summary(c.onSequenced(in.m, in.from, now))
		case confirm:
			out, err := c.onConfirmed(in.producer, in.seq, now)
			got = summary(out)
			if err != nil {
				got = "error " + err.Error()
				if !errors.Is(err, errNotDelivered) {
					got = "unexpected " + got
				}
			}
		case retry:
			var outs []string
			for _, o := range c.onRetry() {
				outs = append(outs, summary(o))
			}
			got = strings.Join(outs, " | ")
		case forget:
			got = "forgot " + strings.Join(c.forgetIdle(now.Add(in.after)), ",")
		default:
			t.Fatalf("step %d: unknown input %T", i, st.in)
		}
		if strings.HasPrefix(st.want, "error") && strings.HasPrefix(got, "error") {
			continue
		}
		if got != st.want {
			t.Fatalf("step %d (%v):\n got  %q\n want %q", i, st.in, got, st.want)
		}
	}
}

func c1(p string, seq int64) confirm { return confirm{p, seq} }

func restored(entries ...*messages.ProducerProgress) *messages.ConsumerProgress {
	return &messages.ConsumerProgress{Producers: entries}
}

func pp(id string, inc uint64, confirmed int64) *messages.ProducerProgress {
	return &messages.ProducerProgress{ProducerId: id, ProducerIncarnation: inc, ConfirmedSeqNr: confirmed,
		ConfirmedAtUnixMs: t0.UnixMilli()}
}

func TestConsumerState(t *testing.T) {
	window4 := consumerSettings{FlowControlWindow: 4}
	tests := []struct {
		name     string
		settings consumerSettings
		restored *messages.ConsumerProgress
		steps    []step
	}{
		{name: "first contact accepts and grants a window", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{c1("p", 1), "request 1:1-4@pc1"},
			{seqMsg(1, 2), "deliver 1:2"},
			{c1("p", 2), "request 1:2-6@pc1"},
		}},
		{name: "a message without its producer controller is dropped", settings: window4, steps: []step{
			{seqMsg(1, 1, "first", "nocontroller"), "drop 1:1 nocontroller"},
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{seqMsg(1, 2, "nocontroller"), "drop 1:2 nocontroller"},
			{c1("p", 1), "request 1:1-4@pc1"},
			{seqMsg(1, 2), "deliver 1:2"},
		}},
		{name: "first contact in the middle of a numbering", settings: window4, steps: []step{
			{seqMsg(1, 7, "first"), "deliver 1:7; request 1:0-10@pc1"},
			{c1("p", 7), "request 1:7-10@pc1"},
			{seqMsg(1, 8), "deliver 1:8"},
		}},
		{name: "one at a time, next only after confirm, stash in order", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{seqMsg(1, 2), ""},
			{seqMsg(1, 3), ""},
			{c1("p", 1), "deliver 1:2; request 1:1-4@pc1"},
			{c1("p", 2), "deliver 1:3; request 1:2-6@pc1"},
			{c1("p", 3), ""},
			{c1("p", 3), "error"},
			{seqMsg(1, 4), "deliver 1:4"},
			{c1("p", 5), "error"},
		}},
		{name: "stash bounded by the window, duplicates while delivering", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{seqMsg(1, 1, "first"), "drop 1:1 duplicate"},
			{seqMsg(1, 2), ""},
			{seqMsg(1, 3), ""},
			{seqMsg(1, 2), "drop 1:2 duplicate"},
			{seqMsg(1, 4), ""},
			{seqMsg(1, 5), ""},
			{seqMsg(1, 6), "drop 1:6 stashfull"},
			{c1("p", 1), "deliver 1:2; request 1:1-4@pc1"},
			{seqMsg(1, 6), ""},
		}},
		{name: "a resent message already confirmed is acknowledged", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{c1("p", 1), "request 1:1-4@pc1"},
			{seqMsg(1, 2), "deliver 1:2"},
			{c1("p", 2), "request 1:2-6@pc1"},
			{seqMsg(1, 3), "deliver 1:3"},
			{c1("p", 3), ""},
			{seqMsg(1, 3), "ack 1:3@pc1; drop 1:3 duplicate"},
			{seqMsg(1, 2), "ack 1:3@pc1; drop 1:2 duplicate"},
			{seqMsg(1, 4), "deliver 1:4"},
		}},
		{name: "gap asks a resend and resumes", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{c1("p", 1), "request 1:1-4@pc1"},
			{seqMsg(1, 3), "resend 1:2@pc1; drop 1:3 outoforder"},
			{seqMsg(1, 4), "drop 1:4 outoforder"},
			{retry{}, "resend 1:2@pc1"},
			{seqMsg(1, 2), "deliver 1:2"},
			{seqMsg(1, 3), ""},
			{c1("p", 2), "deliver 1:3; request 1:2-6@pc1"},
		}},
		{name: "gap found in the stash drops the rest", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{seqMsg(1, 3), ""},
			{seqMsg(1, 4), ""},
			{c1("p", 1), "request 1:1-4@pc1; resend 1:2@pc1; drop 1:3 outoforder; drop 1:4 outoforder"},
			{seqMsg(1, 2), "deliver 1:2"},
		}},
		{name: "first while resending re-sends the request", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{c1("p", 1), "request 1:1-4@pc1"},
			{seqMsg(1, 3), "resend 1:2@pc1; drop 1:3 outoforder"},
			{seqMsg(1, 1, "first"), "request 1:1-4 timeout@pc1; drop 1:1 outoforder"},
		}},
		{name: "producer restart: new incarnation with first resets", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{c1("p", 1), "request 1:1-4@pc1"},
			{seqMsg(1, 2), "deliver 1:2"},
			{seqMsg(2, 1, "first"), ""},
			{c1("p", 2), "deliver 2:1; request 2:0-4@pc2"},
			{c1("p", 1), "request 2:1-4@pc2"},
			{seqMsg(1, 3), "drop 1:3 unexpected"},
			{seqMsg(2, 2), "deliver 2:2"},
		}},
		{name: "unexpected producer while in contact", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{c1("p", 1), "request 1:1-4@pc1"},
			{seqMsg(2, 5), "drop 2:5 unexpected"},
			{seqMsg(1, 2), "deliver 1:2"},
		}},
		{name: "no state and not first: resend from 0 once", settings: window4, steps: []step{
			{seqMsg(3, 5), "resend 3:0@pc3; drop 3:5 outoforder"},
			{seqMsg(3, 6), "drop 3:6 outoforder"},
			{retry{}, "resend 3:0@pc3"},
			{seqMsg(3, 4, "first"), "deliver 3:4; request 3:0-7@pc3"},
			{retry{}, ""},
			{c1("p", 4), "request 3:4-7@pc3"},
		}},
		{name: "restored: duplicates dropped, window granted at first contact", settings: window4,
			restored: restored(pp("p", 7, 5)), steps: []step{
				{retry{}, ""},
				{seqMsg(7, 4, "first"), "request 7:5-9@pc7; drop 7:4 duplicate"},
				{seqMsg(7, 5), "ack 7:5@pc7; drop 7:5 duplicate"},
				{seqMsg(7, 6), "deliver 7:6"},
				{c1("p", 6), ""},
				{seqMsg(7, 7), "deliver 7:7"},
				{c1("p", 7), "request 7:7-11@pc7"},
			}},
		{name: "restored: next expected delivered with a window", settings: window4,
			restored: restored(pp("p", 7, 5)), steps: []step{
				{seqMsg(7, 6, "ack"), "deliver 7:6; request 7:5-9@pc7"},
				{c1("p", 6), "ack 7:6@pc7"},
			}},
		{name: "restored: gap asks resend, first accepted", settings: window4,
			restored: restored(pp("p", 7, 5), pp("q", 8, 2)), steps: []step{
				{seqMsg(7, 8), "resend 7:6@pc7; drop 7:8 outoforder"},
				{seqMsg(8, 9, "first", "producer=q"), "deliver q/8:9; request 8:2-12@pc8"},
			}},
		{name: "restored: other incarnation, first, resets", settings: window4,
			restored: restored(pp("p", 7, 5)), steps: []step{
				{seqMsg(9, 1, "first"), "deliver 9:1; request 9:0-4@pc9"},
				{seqMsg(7, 6), ""},
				{c1("p", 1), "request 9:1-4@pc9; drop 7:6 unexpected"},
				{seqMsg(7, 6), "drop 7:6 unexpected"},
			}},
		{name: "restored: other incarnation, not first, before contact", settings: window4,
			restored: restored(pp("p", 7, 5)), steps: []step{
				{seqMsg(9, 3), "resend 9:0@pc9; drop 9:3 outoforder"},
				{retry{}, "resend 9:0@pc9"},
				{seqMsg(9, 2, "first"), "deliver 9:2; request 9:0-5@pc9"},
			}},
		{name: "half window requests, ack otherwise", settings: window4, steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{c1("p", 1), "request 1:1-4@pc1"},
			{seqMsg(1, 2, "ack"), "deliver 1:2"},
			{c1("p", 2), "request 1:2-6@pc1"},
			{seqMsg(1, 3, "ack"), "deliver 1:3"},
			{c1("p", 3), "ack 1:3@pc1"},
			{seqMsg(1, 4), "deliver 1:4"},
			{c1("p", 4), "request 1:4-8@pc1"},
			{seqMsg(1, 5), "deliver 1:5"},
			{c1("p", 5), ""},
			{seqMsg(1, 6), "deliver 1:6"},
			{c1("p", 6), "request 1:6-10@pc1"},
		}},
		{name: "default window of 50 requests at 25", steps: []step{
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-50@pc1"},
			{c1("p", 1), "request 1:1-50@pc1"},
			{seqMsg(1, 24), "resend 1:2@pc1; drop 1:24 outoforder"},
		}},
		{name: "retry per behaviour", settings: window4, steps: []step{
			{retry{}, ""},
			{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
			{retry{}, ""},
			{c1("p", 1), "request 1:1-4@pc1"},
			{retry{}, "request 1:1-4 timeout@pc1"},
			{seqMsg(1, 3), "resend 1:2@pc1; drop 1:3 outoforder"},
			{retry{}, "resend 1:2@pc1"},
			{seqMsg(2, 1, "first", "producer=q"), "deliver q/2:1; request 2:0-4@pc2"},
			{retry{}, "resend 1:2@pc1"},
			{c1("q", 1), "request 2:1-4@pc2"},
			{retry{}, "resend 1:2@pc1 | request 2:1-4 timeout@pc2"},
		}},
		{name: "only flow control: gaps delivered, no resend",
			settings: consumerSettings{FlowControlWindow: 4, OnlyFlowControl: true}, steps: []step{
				{seqMsg(1, 3), "deliver 1:3; request 1:0-6 noresend@pc1"},
				{c1("p", 3), ""},
				{seqMsg(1, 5), "deliver 1:5"},
				{c1("p", 5), "request 1:5-9 noresend@pc1"},
				{retry{}, "request 1:5-7 timeout noresend@pc1"},
			}},
		{name: "malformed messages dropped", settings: window4, steps: []step{
			{seqMsg(0, 1, "first"), "drop 0:1 unexpected"},
			{seqMsg(1, 0, "first"), "drop 1:0 outoforder"},
			{c1("x", 1), "error"},
		}},
		{name: "retention forgets idle producers only", settings: consumerSettings{FlowControlWindow: 4, ProgressRetention: time.Hour},
			restored: restored(pp("old", 5, 3)), steps: []step{
				{forget{after: time.Hour}, "forgot old"},
				{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
				{seqMsg(2, 1, "first", "producer=q"), "deliver q/2:1; request 2:0-4@pc2"},
				{c1("q", 1), "request 2:1-4@pc2"},
				{forget{after: 59 * time.Minute}, "forgot "},
				{forget{after: time.Hour}, "forgot q"},
				{c1("p", 1), "request 1:1-4@pc1"},
				{forget{after: time.Hour - 2*time.Second}, "forgot "},
				{forget{after: time.Hour}, "forgot p"},
				// Forgotten: p's next message finds no numbering.
				{seqMsg(1, 2), "resend 1:0@pc1; drop 1:2 outoforder"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := newConsumers(tt.settings, tt.restored)
			if err != nil {
				t.Fatal(err)
			}
			run(t, c, tt.steps)
		})
	}
}

func TestConsumersProgressRoundTrip(t *testing.T) {
	c, err := newConsumers(consumerSettings{FlowControlWindow: 4}, restored(pp("z", 9, 40)))
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Minute)
	c.onSequenced(seqMsg(3, 1, "first", "producer=q"), nil, now)
	c.onSequenced(seqMsg(2, 1, "first", "producer=a"), nil, now)
	if _, err := c.onConfirmed("a", 1, now); err != nil {
		t.Fatal(err)
	}
	c.onSequenced(seqMsg(2, 2, "producer=a"), nil, now)

	got := c.progressAfter("q", 1, now.Add(time.Second))
	want := restored(
		&messages.ProducerProgress{ProducerId: "a", ProducerIncarnation: 2, ConfirmedSeqNr: 1, ConfirmedAtUnixMs: now.UnixMilli()},
		&messages.ProducerProgress{ProducerId: "q", ProducerIncarnation: 3, ConfirmedSeqNr: 1, ConfirmedAtUnixMs: now.Add(time.Second).UnixMilli()},
		pp("z", 9, 40),
	)
	if !proto.Equal(got, want) {
		t.Fatalf("progressAfter:\n got  %v\n want %v", got, want)
	}
	// progressAfter changes nothing: q is still delivering 1, unconfirmed.
	if again := c.progressAfter("q", 1, now.Add(time.Second)); !proto.Equal(again, got) {
		t.Fatalf("progressAfter not repeatable: %v", again)
	}
	if p := c.progressAfter("none", 1, now); len(p.GetProducers()) != 2 {
		t.Fatalf("progress of confirmed producers only: %v", p)
	}
	got.Producers[0].ConfirmedSeqNr = 99
	if s := c.byProducer.all()["a"]; s.confirmedSeqNr != 1 {
		t.Fatalf("progress aliases state: confirmed %d", s.confirmedSeqNr)
	}
	got.Producers[0].ConfirmedSeqNr = 1

	b1, err := proto.MarshalOptions{Deterministic: true}.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var decoded messages.ConsumerProgress
	if err := proto.Unmarshal(b1, &decoded); err != nil {
		t.Fatal(err)
	}
	r, err := newConsumers(consumerSettings{FlowControlWindow: 4}, &decoded)
	if err != nil {
		t.Fatal(err)
	}
	// The restored value stores the same progress, byte for byte.
	b2, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.progressAfter("q", 1, now.Add(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if string(b1) != string(b2) {
		t.Fatalf("round trip changed the encoding")
	}
	// And dedups what the first one confirmed.
	run(t, r, []step{
		{seqMsg(3, 1, "first", "producer=q"), "request 3:1-5@pc3; drop q/3:1 duplicate"},
		{seqMsg(2, 2, "producer=a"), "deliver a/2:2; request 2:1-5@pc2"},
	})
}

func TestConsumersRejectInvalidProgress(t *testing.T) {
	tests := []struct {
		name     string
		progress *messages.ConsumerProgress
	}{
		{"negative seqNr", restored(pp("p", 1, -1))},
		{"zero incarnation", restored(pp("p", 0, 1))},
		{"empty producer id", restored(pp("", 1, 1))},
		{"nil entry", restored(nil)},
		{"producer twice", restored(pp("p", 1, 1), pp("p", 2, 1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newConsumers(consumerSettings{}, tt.progress); !errors.Is(err, errInvalidProgress) {
				t.Fatalf("newConsumers: %v, want errInvalidProgress", err)
			}
		})
	}
	if _, err := newConsumers(consumerSettings{}, restored(pp("p", 1, 0))); err != nil {
		t.Fatalf("zero confirmed is valid: %v", err)
	}
}

func TestConsumerSettingsDefaults(t *testing.T) {
	got := consumerSettings{}.withDefaults()
	want := consumerSettings{FlowControlWindow: 50, ResendIntervalMin: 2 * time.Second,
		ResendIntervalMax: 30 * time.Second, ProgressRetention: time.Hour}
	if got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	set := consumerSettings{FlowControlWindow: 8, ResendIntervalMin: time.Second, ResendIntervalMax: 5 * time.Second,
		OnlyFlowControl: true, ProgressRetention: time.Minute}
	if got := set.withDefaults(); got != set {
		t.Fatalf("set values changed: %+v", got)
	}
	if got := (consumerSettings{ResendIntervalMin: time.Minute}).withDefaults(); got.ResendIntervalMax != time.Minute {
		t.Fatalf("max below min kept: %v", got.ResendIntervalMax)
	}
}

// TestConsumersStoppingAcks: a stopping entity acknowledges what it
// confirmed to each producer it is in contact with, and to no other.
func TestConsumersStoppingAcks(t *testing.T) {
	c, err := newConsumers(consumerSettings{FlowControlWindow: 4}, restored(pp("r", 9, 3)))
	if err != nil {
		t.Fatal(err)
	}
	run(t, c, []step{
		{seqMsg(1, 1, "first"), "deliver 1:1; request 1:0-4@pc1"},
		{c1("p", 1), "request 1:1-4@pc1"},
		{seqMsg(1, 2), "deliver 1:2"},
		{c1("p", 2), "request 1:2-6@pc1"},
		{seqMsg(1, 3), "deliver 1:3"},
		{seqMsg(2, 1, "first", "producer=q"), "deliver q/2:1; request 2:0-4@pc2"},
	})
	var got []string
	for _, o := range c.onStopping() {
		got = append(got, summary(o))
	}
	// p confirmed 2 (3 is being processed); q confirmed nothing; r, restored,
	// was never in contact.
	if want := []string{"ack 1:2@pc1"}; strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("stopping: %q, want %q", got, want)
	}
}

// TestConsumerShortForm: a message in short form is read with the type
// its numbering named in full form, and answered at its sender; one the
// consumer cannot read (it lost the numbering's start) is asked again, and
// comes in full form.
func TestConsumerShortForm(t *testing.T) {
	short := func(inc uint64, seq int64) fromSender { return fromSender{seqMsg(inc, seq, "short"), pcPID(inc)} }
	tests := []struct {
		name     string
		restored *messages.ConsumerProgress
		steps    []step
	}{
		{"read with the type named before, answered at the sender", nil, []step{
			{seqMsg(1, 1, "first", "ping"), "deliver 1:1; request 1:0-8@pc1"},
			{c1("p", 1), "request 1:1-8@pc1"},
			{short(1, 2), "deliver 1:2 short protoshard.testpb.Ping"},
			{c1("p", 2), ""},
			{short(1, 3), "deliver 1:3 short protoshard.testpb.Ping"},
			{c1("p", 3), ""},
			{short(1, 4), "deliver 1:4 short protoshard.testpb.Ping"},
			{c1("p", 4), "request 1:4-12@pc1"},
		}},
		{"stashed in short form, read in order", nil, []step{
			{seqMsg(1, 1, "first", "ping"), "deliver 1:1; request 1:0-8@pc1"},
			{short(1, 2), ""},
			{c1("p", 1), "deliver 1:2 short protoshard.testpb.Ping; request 1:1-8@pc1"},
		}},
		{"restored progress cannot read it: resend from there", restored(pp("p", 1, 5)), []step{
			{short(1, 6), "resend 1:6@pc1; drop 1:6 outoforder"},
			{short(1, 7), "drop 1:7 outoforder"},
			{seqMsg(1, 6, "ping"), "deliver 1:6"},
			{c1("p", 6), "request 1:6-14@pc1"},
			{short(1, 7), "deliver 1:7 short protoshard.testpb.Ping"},
		}},
		{"a new entity incarnation in short form: resend all", nil, []step{
			{short(1, 6), "resend 1:0@pc1; drop 1:6 outoforder"},
			{seqMsg(1, 6, "first", "ping"), "deliver 1:6; request 1:0-13@pc1"},
		}},
		{"a new numbering forgets the types", nil, []step{
			{seqMsg(1, 1, "first", "ping"), "deliver 1:1; request 1:0-8@pc1"},
			{c1("p", 1), "request 1:1-8@pc1"},
			{short(1, 2), "deliver 1:2 short protoshard.testpb.Ping"},
			{c1("p", 2), ""},
			{seqMsg(2, 1, "first"), "deliver 2:1; request 2:0-8@pc2"},
			{c1("p", 1), "request 2:1-8@pc2"},
			{short(2, 2), "resend 2:2@pc2; drop 2:2 outoforder"},
		}},
		{"neither PID nor sender: dropped", nil, []step{
			{seqMsg(1, 1, "first", "ping"), "deliver 1:1; request 1:0-8@pc1"},
			{c1("p", 1), "request 1:1-8@pc1"},
			{seqMsg(1, 2, "short"), "drop 1:2 nocontroller"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := newConsumers(consumerSettings{FlowControlWindow: 8}, tt.restored)
			if err != nil {
				t.Fatal(err)
			}
			run(t, c, tt.steps)
		})
	}
}
