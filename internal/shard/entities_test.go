package shard

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/staleness"
	"github.com/protoshard/protoshard/shardactor"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// pidOf is the PID of entity id's actor; every incarnation has the same,
// as in proto.actor.
func pidOf(id string) *actor.PID {
	return actor.NewPID("nonhost", "region/7/"+EntityName(id))
}

func msg(v string) bufferedMessage { return bufferedMessage{message: v, since: t0} }

func startMsg() bufferedMessage { return bufferedMessage{start: true, since: t0} }

// checkInvariants verifies what every transition must keep: counts match
// the records, PIDs only where an actor runs, queued writes only for
// entities that wait for one, held messages only where they can be
// delivered later.
func checkInvariants(t *testing.T, es *entities) {
	t.Helper()
	held, live := 0, 0
	for _, id := range es.heldFor.Keys() {
		n := es.heldFor.LenOf(id)
		held += n
		if n == 0 || es.byID.get(id) == nil {
			t.Fatalf("entity %q: %d messages held, record %v", id, n, es.byID.get(id))
		}
	}
	records := 0
	for r := range es.byID.all() {
		id := r.id
		records++
		if es.byID.get(id) != r {
			t.Fatalf("entity %q: its record is not found by its ID", id)
		}
		switch r.state {
		case noState:
			t.Fatalf("entity %q has a record in NoState", id)
		case active, passivating:
			live++
			if of, ok := es.entityOf(r.pid); !ok || of != id {
				t.Fatalf("entity %q is %s without its PID found (%v: %q, %v)", id, r.state, r.pid, of, ok)
			}
		default:
			if r.pid != nil {
				t.Fatalf("entity %q is %s with a PID", id, r.state)
			}
		}
		if n := es.heldFor.LenOf(id); n > 0 && r.state != passivating && r.state != rememberingStart && r.state != rememberingStop &&
			r.state != rememberedButNotCreated {
			t.Fatalf("entity %q holds %d messages in state %s", id, n, r.state)
		}
	}
	if records != es.byID.len() {
		t.Fatalf("%d records, %d counted", records, es.byID.len())
	}
	if held != es.heldCount() || live != es.live || live != len(es.liveIDs()) {
		t.Fatalf("counts: held %d (counted %d), live %d (counted %d, %d IDs)", es.heldCount(), held, es.live, live, len(es.liveIDs()))
	}
	for _, set := range []map[string]struct{}{es.pending, es.writing} {
		for id := range set {
			if s := es.state(id); s != rememberingStart && s != rememberingStop {
				t.Fatalf("entity %q queued for the store in state %s", id, s)
			}
		}
	}
	for id := range es.pending {
		if _, ok := es.writing[id]; ok {
			t.Fatalf("entity %q both queued and in flight", id)
		}
	}
}

// setup brings entity "e" to a state through valid transitions.
type setup struct {
	name        string
	remembering bool
	to          func(t *testing.T, es *entities)
	want        entityState
	inFlight    bool // its write is in flight
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func setups() []setup {
	startRemembered := func(t *testing.T, es *entities) {
		must(t, es.recovered([]string{"e"}))
		_, err := es.started("e", pidOf("e"))
		must(t, err)
	}
	passivated := func(t *testing.T, es *entities) {
		startRemembered(t, es)
		_, err := es.passivate("e")
		must(t, err)
		_, _, _, err = es.terminated(pidOf("e"))
		must(t, err)
	}
	return []setup{
		{name: "NoState", to: func(*testing.T, *entities) {}, want: noState},
		{name: "NoState remembering", remembering: true, to: func(*testing.T, *entities) {}, want: noState},
		{name: "RememberedButNotCreated", remembering: true, want: rememberedButNotCreated,
			to: func(t *testing.T, es *entities) { must(t, es.recovered([]string{"e"})) }},
		{name: "RememberingStart queued", remembering: true, want: rememberingStart,
			to: func(t *testing.T, es *entities) { _, _, err := es.deliver("e", msg("m0")); must(t, err) }},
		{name: "RememberingStart in flight", remembering: true, want: rememberingStart, inFlight: true,
			to: func(t *testing.T, es *entities) {
				_, _, err := es.deliver("e", msg("m0"))
				must(t, err)
				es.nextWrite()
			}},
		{name: "RememberingStop queued", remembering: true, want: rememberingStop, to: passivated},
		{name: "RememberingStop in flight", remembering: true, want: rememberingStop, inFlight: true,
			to: func(t *testing.T, es *entities) { passivated(t, es); es.nextWrite() }},
		{name: "Active", want: active,
			to: func(t *testing.T, es *entities) { _, err := es.started("e", pidOf("e")); must(t, err) }},
		{name: "Active remembering", remembering: true, want: active, to: startRemembered},
		{name: "Passivating", want: passivating,
			to: func(t *testing.T, es *entities) {
				_, err := es.started("e", pidOf("e"))
				must(t, err)
				_, err = es.passivate("e")
				must(t, err)
			}},
		{name: "Passivating remembering", remembering: true, want: passivating,
			to: func(t *testing.T, es *entities) {
				startRemembered(t, es)
				_, err := es.passivate("e")
				must(t, err)
			}},
		{name: "Passivating holding", want: passivating,
			to: func(t *testing.T, es *entities) {
				_, err := es.started("e", pidOf("e"))
				must(t, err)
				_, err = es.passivate("e")
				must(t, err)
				_, _, err = es.deliver("e", msg("m0"))
				must(t, err)
			}},
		{name: "Passivating remembering holding", remembering: true, want: passivating,
			to: func(t *testing.T, es *entities) {
				startRemembered(t, es)
				_, err := es.passivate("e")
				must(t, err)
				_, _, err = es.deliver("e", msg("m0"))
				must(t, err)
			}},
		{name: "WaitingForRestart", remembering: true, want: waitingForRestart,
			to: func(t *testing.T, es *entities) {
				startRemembered(t, es)
				_, _, _, err := es.terminated(pidOf("e"))
				must(t, err)
			}},
	}
}

// event is one input to the entities, with what it returned, as text.
type event struct {
	name string
	do   func(es *entities) (result string, err error)
}

func events() []event {
	return []event{
		{"deliver", func(es *entities) (string, error) {
			d, _, err := es.deliver("e", msg("m"))
			return decisionName(d), err
		}},
		{"started", func(es *entities) (string, error) {
			held, err := es.started("e", pidOf("e"))
			return fmt.Sprintf("%d held", len(held)), err
		}},
		{"passivate", func(es *entities) (string, error) {
			_, err := es.passivate("e")
			return "", err
		}},
		{"terminated", func(es *entities) (string, error) {
			_, d, held, err := es.terminated(pidOf("e"))
			return fmt.Sprintf("%s, %d held", terminatedName(d), len(held)), err
		}},
		{"start failed", func(es *entities) (string, error) {
			held, again, err := es.startFailed("e", errors.New("spawn: name exists"))
			return fmt.Sprintf("%d held, restart again %v", len(held), again), err
		}},
		{"start refused", func(es *entities) (string, error) {
			held, again, err := es.startFailed("e", fmt.Errorf("spawn: %w", staleness.ErrStale))
			return fmt.Sprintf("%d held, restart again %v", len(held), again), err
		}},
		{"restartDue", func(es *entities) (string, error) {
			return fmt.Sprint(es.restartDue("e")), nil
		}},
		{"recovered", func(es *entities) (string, error) {
			return "", es.recovered([]string{"e"})
		}},
		{"acked by another shard", func(es *entities) (string, error) {
			es.startRequested([]string{"e"})
			counted, moved := es.acked("e", "8", "7")
			return fmt.Sprintf("counted %v, moved %v", counted, moved), nil
		}},
		{"written", func(es *entities) (string, error) {
			toStart, err := es.written()
			return fmt.Sprint(toStart), err
		}},
		{"write failed", func(es *entities) (string, error) {
			return "", es.writeFailed()
		}},
		{"write failed for good", func(es *entities) (string, error) {
			return fmt.Sprintf("%d dropped", len(es.writeFailedForGood())), nil
		}},
		{"hand-off", func(es *entities) (string, error) {
			pids, dropped := es.handOff()
			return fmt.Sprintf("%d to stop, %d dropped", len(pids), len(dropped)), nil
		}},
	}
}

func decisionName(d deliveryDecision) string {
	switch d {
	case sendNow:
		return "sendNow"
	case startNow:
		return "startNow"
	case held:
		return "held"
	}
	return "-"
}

func terminatedName(d terminatedDecision) string {
	switch d {
	case entityGone:
		return "gone"
	case restartHeld:
		return "restartHeld"
	case restartAfterBackoff:
		return "restartAfterBackoff"
	case writeStop:
		return "writeStop"
	}
	return "-"
}

// TestEntityTransitions drives entity "e" from every state with every
// event, once each, and checks the state after, what the entities said,
// and that a refused event changed nothing.
func TestEntityTransitions(t *testing.T) {
	const invalid = "invalid"
	type outcome struct {
		state  entityState
		result string // what the event returned; invalid: refused
	}
	// want[setup][event]; an event missing from a row is refused and
	// changes nothing.
	want := map[string]map[string]outcome{
		"NoState": {
			"deliver":                {noState, "startNow"},
			"started":                {active, "0 held"},
			"terminated":             {noState, "unknown"},
			"start failed":           {noState, "0 held, restart again false"},
			"start refused":          {noState, "0 held, restart again false"},
			"restartDue":             {noState, "false"},
			"acked by another shard": {noState, "counted true, moved false"},
			"written":                {noState, invalid},
			"write failed":           {noState, invalid},
			"write failed for good":  {noState, "0 dropped"},
			"hand-off":               {noState, "0 to stop, 0 dropped"},
		},
		"NoState remembering": {
			"deliver":                {rememberingStart, "held"},
			"terminated":             {noState, "unknown"},
			"start failed":           {noState, "0 held, restart again false"},
			"start refused":          {noState, "0 held, restart again false"},
			"restartDue":             {noState, "false"},
			"recovered":              {rememberedButNotCreated, ""},
			"acked by another shard": {noState, "counted true, moved false"},
			"write failed for good":  {noState, "0 dropped"},
			"hand-off":               {noState, "0 to stop, 0 dropped"},
		},
		"RememberedButNotCreated": {
			"deliver":                {rememberedButNotCreated, "startNow"},
			"started":                {active, "0 held"},
			"terminated":             {rememberedButNotCreated, "unknown"},
			"start failed":           {rememberedButNotCreated, "0 held, restart again false"},
			"start refused":          {rememberedButNotCreated, "0 held, restart again false"},
			"restartDue":             {rememberedButNotCreated, "false"},
			"acked by another shard": {rememberingStop, "counted true, moved true"},
			"write failed for good":  {rememberedButNotCreated, "0 dropped"},
			"hand-off":               {noState, "0 to stop, 0 dropped"},
		},
		"RememberingStart queued": {
			"deliver":                {rememberingStart, "held"},
			"terminated":             {rememberingStart, "unknown"},
			"restartDue":             {rememberingStart, "false"},
			"acked by another shard": {rememberingStart, "counted true, moved false"},
			"write failed for good":  {rememberingStart, "0 dropped"},
			"hand-off":               {noState, "0 to stop, 1 dropped"},
		},
		"RememberingStart in flight": {
			"deliver":                {rememberingStart, "held"},
			"terminated":             {rememberingStart, "unknown"},
			"restartDue":             {rememberingStart, "false"},
			"acked by another shard": {rememberingStart, "counted true, moved false"},
			"written":                {rememberedButNotCreated, "[e]"},
			"write failed":           {rememberingStart, ""},
			"write failed for good":  {noState, "1 dropped"},
			"hand-off":               {noState, "0 to stop, 1 dropped"},
		},
		"RememberingStop queued": {
			// The start replaces the stop in the queue.
			"deliver":                {rememberingStart, "held"},
			"terminated":             {rememberingStop, "unknown"},
			"restartDue":             {rememberingStop, "false"},
			"acked by another shard": {rememberingStop, "counted true, moved false"},
			"write failed for good":  {rememberingStop, "0 dropped"},
			"hand-off":               {noState, "0 to stop, 0 dropped"},
		},
		"RememberingStop in flight": {
			"deliver":                {rememberingStop, "held"},
			"terminated":             {rememberingStop, "unknown"},
			"restartDue":             {rememberingStop, "false"},
			"acked by another shard": {rememberingStop, "counted true, moved false"},
			"written":                {noState, "[]"},
			"write failed":           {rememberingStop, ""},
			"write failed for good":  {rememberedButNotCreated, "0 dropped"},
			"hand-off":               {noState, "0 to stop, 0 dropped"},
		},
		"Active": {
			"deliver":                {active, "sendNow"},
			"passivate":              {passivating, ""},
			"terminated":             {noState, "gone, 0 held"},
			"restartDue":             {active, "false"},
			"acked by another shard": {active, "counted true, moved false"},
			"write failed for good":  {active, "0 dropped"},
			"hand-off":               {active, "1 to stop, 0 dropped"},
		},
		"Active remembering": {
			"deliver":                {active, "sendNow"},
			"passivate":              {passivating, ""},
			"terminated":             {waitingForRestart, "restartAfterBackoff, 0 held"},
			"restartDue":             {active, "false"},
			"acked by another shard": {active, "counted true, moved false"},
			"write failed for good":  {active, "0 dropped"},
			"hand-off":               {active, "1 to stop, 0 dropped"},
		},
		"Passivating": {
			"deliver":                {passivating, "held"},
			"passivate":              {passivating, "already"},
			"terminated":             {noState, "gone, 0 held"},
			"restartDue":             {passivating, "false"},
			"acked by another shard": {passivating, "counted true, moved false"},
			"write failed for good":  {passivating, "0 dropped"},
			"hand-off":               {passivating, "1 to stop, 0 dropped"},
		},
		"Passivating holding": {
			"deliver":                {passivating, "held"},
			"passivate":              {passivating, "already"},
			"terminated":             {noState, "restartHeld, 1 held"},
			"restartDue":             {passivating, "false"},
			"acked by another shard": {passivating, "counted true, moved false"},
			"write failed for good":  {passivating, "0 dropped"},
			"hand-off":               {passivating, "1 to stop, 1 dropped"},
		},
		"Passivating remembering holding": {
			"deliver":                {passivating, "held"},
			"passivate":              {passivating, "already"},
			"terminated":             {rememberedButNotCreated, "restartHeld, 1 held"},
			"restartDue":             {passivating, "false"},
			"acked by another shard": {passivating, "counted true, moved false"},
			"write failed for good":  {passivating, "0 dropped"},
			"hand-off":               {passivating, "1 to stop, 1 dropped"},
		},
		"Passivating remembering": {
			"deliver":                {passivating, "held"},
			"passivate":              {passivating, "already"},
			"terminated":             {rememberingStop, "writeStop, 0 held"},
			"restartDue":             {passivating, "false"},
			"acked by another shard": {passivating, "counted true, moved false"},
			"write failed for good":  {passivating, "0 dropped"},
			"hand-off":               {passivating, "1 to stop, 0 dropped"},
		},
		"WaitingForRestart": {
			"deliver":                {waitingForRestart, "startNow"},
			"started":                {active, "0 held"},
			"terminated":             {waitingForRestart, "unknown"},
			"start failed":           {rememberedButNotCreated, "0 held, restart again false"},
			"start refused":          {waitingForRestart, "0 held, restart again true"}, // stale: due again after the back-off
			"restartDue":             {waitingForRestart, "true"},
			"acked by another shard": {waitingForRestart, "counted true, moved false"},
			"write failed for good":  {waitingForRestart, "0 dropped"},
			"hand-off":               {noState, "0 to stop, 0 dropped"},
		},
	}
	for _, su := range setups() {
		row, ok := want[su.name]
		if !ok {
			t.Fatalf("no expectations for %s", su.name)
		}
		for _, ev := range events() {
			t.Run(su.name+"/"+ev.name, func(t *testing.T) {
				es := newEntities(su.remembering, 100)
				su.to(t, es)
				checkInvariants(t, es)
				if got := es.state("e"); got != su.want {
					t.Fatalf("setup reached %s, want %s", got, su.want)
				}
				if _, inFlight := es.writing["e"]; inFlight != su.inFlight {
					t.Fatalf("setup: in flight %v, want %v", inFlight, su.inFlight)
				}
				before := snapshot(es)
				result, err := ev.do(es)
				switch {
				case errors.Is(err, errInvalidTransition):
					result = invalid
				case errors.Is(err, errUnknownEntity):
					result = "unknown"
				case errors.Is(err, errAlreadyPassivate):
					result = "already"
				case err != nil:
					t.Fatalf("unexpected error %v", err)
				}
				w, listed := row[ev.name]
				if !listed {
					w = outcome{su.want, invalid}
				}
				if result != w.result {
					t.Fatalf("%s: result %q, want %q", ev.name, result, w.result)
				}
				if got := es.state("e"); got != w.state {
					t.Fatalf("%s: state %s, want %s", ev.name, got, w.state)
				}
				if result == invalid || result == "unknown" || result == "already" {
					if after := snapshot(es); after != before {
						t.Fatalf("a refused %s changed the entities:\n%s\nbecame\n%s", ev.name, before, after)
					}
				}
				checkInvariants(t, es)
			})
		}
	}
}

// snapshot describes the entities, to see that a refused event changed
// nothing.
func snapshot(es *entities) string {
	out := fmt.Sprintf("held %d live %d pending %v writing %v backingOff %v handingOff %v unacked %v\n",
		es.heldCount(), es.live, es.pending, es.writing, es.backingOff, es.handingOff, es.unackedIDs())
	var ids []string
	for r := range es.byID.all() {
		ids = append(ids, r.id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := es.byID.get(id)
		out += fmt.Sprintf("%s: %s %v mark %d uses %d, %d held\n", id, r.state, r.pid, r.mark, r.uses, es.heldFor.LenOf(id))
	}
	return out
}

// TestEntitiesPassivationKeepsMessagesForTheNextIncarnation: what arrives
// while an entity passivates goes to its next incarnation, in order, a
// StartEntity included; nothing is written for it when remembering.
func TestEntitiesPassivationKeepsMessagesForTheNextIncarnation(t *testing.T) {
	for _, remembering := range []bool{false, true} {
		t.Run(fmt.Sprint("remembering ", remembering), func(t *testing.T) {
			es := newEntities(remembering, 100)
			if remembering {
				must(t, es.recovered([]string{"p"}))
			}
			_, err := es.started("p", pidOf("p"))
			must(t, err)
			pid, err := es.passivate("p")
			must(t, err)
			if !pid.Equal(pidOf("p")) {
				t.Fatalf("passivate returned %v", pid)
			}
			for _, m := range []bufferedMessage{msg("m1"), startMsg(), msg("m2")} {
				d, _, err := es.deliver("p", m)
				must(t, err)
				if d != held {
					t.Fatalf("decision %s, want held", decisionName(d))
				}
				checkInvariants(t, es)
			}
			if es.liveCount() != 1 || !reflect.DeepEqual(es.liveIDs(), []string{"p"}) {
				t.Fatalf("a passivating entity still counts: %d %v", es.liveCount(), es.liveIDs())
			}
			id, d, msgs, err := es.terminated(pidOf("p"))
			must(t, err)
			if id != "p" || d != restartHeld || len(msgs) != 3 || msgs[0].message != "m1" || !msgs[1].start || msgs[2].message != "m2" {
				t.Fatalf("terminated: %s %s %+v", id, terminatedName(d), msgs)
			}
			checkInvariants(t, es)
			if _, _, ok := es.nextWrite(); ok {
				t.Fatal("a passivation with messages held writes nothing")
			}
			rest, err := es.started("p", pidOf("p"))
			must(t, err)
			if len(rest) != 0 || es.state("p") != active {
				t.Fatalf("started again: %v %s", rest, es.state("p"))
			}
			checkInvariants(t, es)
		})
	}
}

// TestEntitiesRememberBatches: new entities wait for their IDs to be
// written; what arrives while a write is in flight goes into the next one.
func TestEntitiesRememberBatches(t *testing.T) {
	es := newEntities(true, 100)
	deliver := func(id string, m bufferedMessage) {
		t.Helper()
		d, _, err := es.deliver(id, m)
		must(t, err)
		if d != held {
			t.Fatalf("%s: decision %s, want held", id, decisionName(d))
		}
		checkInvariants(t, es)
	}
	deliver("a", msg("a1"))
	deliver("b", startMsg())
	deliver("a", msg("a2"))
	started, stopped, ok := es.nextWrite()
	if !ok || !reflect.DeepEqual(started, []string{"a", "b"}) || stopped != nil {
		t.Fatalf("first write: %v %v %v", started, stopped, ok)
	}
	deliver("c", msg("c1"))
	deliver("a", msg("a3"))
	if _, _, ok := es.nextWrite(); ok {
		t.Fatal("a second write while one is in flight")
	}
	toStart, err := es.written()
	must(t, err)
	if !reflect.DeepEqual(toStart, []string{"a", "b"}) {
		t.Fatalf("to start: %v", toStart)
	}
	checkInvariants(t, es)
	msgs, err := es.started("a", pidOf("a"))
	must(t, err)
	var got []any
	for _, m := range msgs {
		got = append(got, m.message)
	}
	if !reflect.DeepEqual(got, []any{"a1", "a2", "a3"}) {
		t.Fatalf("a's messages: %v", got)
	}
	started, stopped, ok = es.nextWrite()
	if !ok || !reflect.DeepEqual(started, []string{"c"}) || stopped != nil {
		t.Fatalf("second write: %v %v %v", started, stopped, ok)
	}
	checkInvariants(t, es)
}

// TestEntitiesWriteFailures: a failed write is queued again but not taken
// before the back-off is over; messages that waited longer than the bound
// are taken out, in order, those for passivating entities never.
func TestEntitiesWriteFailures(t *testing.T) {
	es := newEntities(true, 100)
	must(t, es.recovered([]string{"p"}))
	_, err := es.started("p", pidOf("p"))
	must(t, err)
	_, err = es.passivate("p")
	must(t, err)
	for i, m := range []bufferedMessage{
		{message: "old", since: t0},
		{message: "new", since: t0.Add(5 * time.Second)},
	} {
		for _, id := range []string{"a", "p"} {
			if _, _, err := es.deliver(id, m); err != nil {
				t.Fatalf("message %d for %s: %v", i, id, err)
			}
		}
	}
	if _, _, ok := es.nextWrite(); !ok {
		t.Fatal("no write")
	}
	must(t, es.writeFailed())
	checkInvariants(t, es)
	if _, _, ok := es.nextWrite(); ok {
		t.Fatal("a write taken during the back-off")
	}
	expired := es.expire(t0.Add(4*time.Second), 3*time.Second)
	if len(expired) != 1 || expired[0].id != "a" || expired[0].m.message != "old" {
		t.Fatalf("expired: %+v", expired)
	}
	if got := es.expire(t0.Add(4*time.Second), 3*time.Second); len(got) != 0 {
		t.Fatalf("expired twice: %+v", got)
	}
	checkInvariants(t, es)
	es.retryWrites()
	started, _, ok := es.nextWrite()
	if !ok || !reflect.DeepEqual(started, []string{"a"}) {
		t.Fatalf("retried write: %v %v", started, ok)
	}
	// Refused for good: a's remaining message is handed back, a forgotten;
	// the passivating entity keeps its messages.
	dropped := es.writeFailedForGood()
	if len(dropped) != 1 || dropped[0].id != "a" || dropped[0].m.message != "new" {
		t.Fatalf("dropped for good: %+v", dropped)
	}
	if es.state("a") != noState || es.heldCount() != 2 {
		t.Fatalf("after the failure: a %s, %d held", es.state("a"), es.heldCount())
	}
	checkInvariants(t, es)
}

func TestEntitiesHeldBound(t *testing.T) {
	es := newEntities(true, 1)
	if _, _, err := es.deliver("a", msg("1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := es.deliver("b", msg("1")); !errors.Is(err, errHeldFull) {
		t.Fatalf("second message: %v, want errHeldFull", err)
	}
	if es.state("b") != noState {
		t.Fatalf("b is %s after its message was refused", es.state("b"))
	}
	if _, _, err := es.deliver("a", msg("2")); !errors.Is(err, errHeldFull) {
		t.Fatalf("third message: %v, want errHeldFull", err)
	}
	checkInvariants(t, es)
}

// TestEntitiesHandOff: running entities are kept until they terminate,
// everything else is forgotten and every held message handed back; no
// transition but termination is allowed after.
func TestEntitiesHandOff(t *testing.T) {
	es := newEntities(true, 100)
	must(t, es.recovered([]string{"r", "p", "w"}))
	for _, id := range []string{"p", "w"} {
		_, err := es.started(id, pidOf(id))
		must(t, err)
	}
	_, err := es.passivate("p")
	must(t, err)
	_, _, _, err = es.terminated(pidOf("w")) // WaitingForRestart
	must(t, err)
	_, err = es.started("w", pidOf("w"))
	must(t, err)
	for _, id := range []string{"p", "new"} {
		_, _, err := es.deliver(id, msg("x"))
		must(t, err)
	}
	es.nextWrite()
	es.startRequested([]string{"r"})

	pids, dropped := es.handOff()
	if !reflect.DeepEqual(pids, []*actor.PID{pidOf("p"), pidOf("w")}) {
		t.Fatalf("to stop: %v", pids)
	}
	if len(dropped) != 2 || dropped[0].id != "new" || dropped[1].id != "p" {
		t.Fatalf("dropped: %+v", dropped)
	}
	checkInvariants(t, es)
	for _, id := range []string{"r", "new"} {
		if es.state(id) != noState {
			t.Fatalf("%s is %s after the hand-off", id, es.state(id))
		}
	}
	if _, _, err := es.deliver("x", msg("late")); !errors.Is(err, errHandingOff) {
		t.Fatalf("deliver during hand-off: %v", err)
	}
	if _, err := es.started("x", pidOf("x")); !errors.Is(err, errHandingOff) {
		t.Fatalf("started during hand-off: %v", err)
	}
	if _, err := es.passivate("w"); !errors.Is(err, errHandingOff) {
		t.Fatalf("passivate during hand-off: %v", err)
	}
	if counted, _ := es.acked("r", "7", "7"); counted {
		t.Fatal("an ack counted during hand-off")
	}
	if _, err := es.written(); !errors.Is(err, errInvalidTransition) {
		t.Fatalf("written during hand-off: %v", err)
	}
	for i, pid := range pids {
		_, d, _, err := es.terminated(pid)
		must(t, err)
		if d != entityGone || es.liveCount() != 1-i {
			t.Fatalf("terminated %v: %s, %d live", pid, terminatedName(d), es.liveCount())
		}
		checkInvariants(t, es)
	}
	if es.byID.len() != 0 {
		t.Fatalf("left after the hand-off: %s", snapshot(es))
	}
}

// TestEntitiesRecoveryAcks: only the first ack of a StartEntity the shard
// sent counts; an entity acked by another shard is forgotten here.
func TestEntitiesRecoveryAcks(t *testing.T) {
	es := newEntities(true, 100)
	must(t, es.recovered([]string{"a", "b", "c"}))
	if err := es.recovered([]string{"a"}); !errors.Is(err, errInvalidTransition) {
		t.Fatalf("recovered twice: %v", err)
	}
	es.startRequested([]string{"a", "b", "c"})
	if got := es.unackedIDs(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("unacked: %v", got)
	}
	_, err := es.started("a", pidOf("a"))
	must(t, err)
	cases := []struct {
		id, shard      string
		counted, moved bool
		state          entityState
	}{
		{"a", "7", true, false, active},
		{"a", "7", false, false, active},                 // the resent StartEntity's second ack
		{"b", "8", true, true, rememberingStop},          // started on shard 8
		{"b", "8", false, false, rememberingStop},        // once
		{"c", "7", true, false, rememberedButNotCreated}, // started by the region's routing, not yet here
		{"d", "7", false, false, noState},                // never asked
	}
	for _, c := range cases {
		counted, moved := es.acked(c.id, c.shard, "7")
		if counted != c.counted || moved != c.moved || es.state(c.id) != c.state {
			t.Fatalf("ack %s from %s: counted %v moved %v state %s; want %v %v %s",
				c.id, c.shard, counted, moved, es.state(c.id), c.counted, c.moved, c.state)
		}
		checkInvariants(t, es)
	}
	if got := es.unackedIDs(); len(got) != 0 {
		t.Fatalf("unacked: %v", got)
	}
	started, stopped, ok := es.nextWrite()
	if !ok || started != nil || !reflect.DeepEqual(stopped, []string{"b"}) {
		t.Fatalf("write: %v %v %v", started, stopped, ok)
	}
}

// TestEntitiesIdle: only active entities are checked; an entity is idle
// once the first check after its last use (its start included) ran the
// timeout ago.
func TestEntitiesIdle(t *testing.T) {
	es := newEntities(false, 100)
	for _, id := range []string{"a", "b", "c"} {
		_, err := es.started(id, pidOf(id))
		must(t, err)
	}
	_, err := es.passivate("c")
	must(t, err)
	if !es.markUsed("a") || es.markUsed("c") || es.markUsed("nobody") {
		t.Fatal("markUsed reports whether the entity is active")
	}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	cases := []struct {
		at   time.Time
		use  string // used after the check
		want []string
	}{
		{at(0), "", nil}, // no check ran a timeout ago
		{at(500 * time.Millisecond), "a", nil},
		{at(time.Second), "", []string{"b"}}, // the check at 0 saw a and b started; a was used after it
		{at(1900 * time.Millisecond), "", []string{"b"}},
		{at(2 * time.Second), "", []string{"a", "b"}}, // the first check after a's use ran a timeout ago
		{at(time.Hour), "", []string{"a", "b"}},
	}
	for i, c := range cases {
		if got := es.idle(c.at, time.Second); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("check %d at %v: idle %v, want %v", i, c.at.Sub(t0), got, c.want)
		}
		if c.use != "" {
			es.markUsed(c.use)
		}
	}
	if got := es.idle(at(2*time.Hour), -1); got != nil {
		t.Fatalf("idle passivation off: %v", got)
	}
	if len(es.checks.recent) > 3 {
		t.Fatalf("checks kept: %d", len(es.checks.recent))
	}
}

// TestEntitiesMarksRunOut: when the marks run out, the active entities
// are numbered again in the order of their last use, and idle checks and
// the order a replacement policy would be given stay as they were.
func TestEntitiesMarksRunOut(t *testing.T) {
	es := newEntities(false, 100)
	es.checks.uses = math.MaxUint32 - 4
	for _, id := range []string{"a", "b", "c", "d"} { // marks ...-3 to the last
		_, err := es.started(id, pidOf(id))
		must(t, err)
	}
	es.idle(t0, time.Second) // saw a, b, c and d
	_, err := es.passivate("d")
	must(t, err)
	es.markUsed("b") // renumbers a 1, b 2, c 3; b's use is 4
	if got := es.checks.uses; got != 4 {
		t.Fatalf("uses after renumbering: %d", got)
	}
	var order []string
	uses := es.activeUses()
	slices.SortFunc(uses, byMark)
	for _, u := range uses {
		order = append(order, u.id)
	}
	if !reflect.DeepEqual(order, []string{"a", "c", "b"}) {
		t.Fatalf("order of last use: %v", order)
	}
	es.idle(t0.Add(500*time.Millisecond), time.Second) // saw b's use
	if got := es.idle(t0.Add(time.Second), time.Second); !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Fatalf("idle: %v", got)
	}
	if got := es.idle(t0.Add(1500*time.Millisecond), time.Second); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("idle later: %v", got)
	}
}

// TestEntitiesKeyShared: the record of a running entity named after its
// ID is keyed by the bytes of its PID's ID, not by the copy of the ID that
// came in a message; an ID that needs escaping keeps its own. A PID is an
// entity's only if it is the very actor of the entity its name stands for.
func TestEntitiesKeyShared(t *testing.T) {
	es := newEntities(false, 100)
	pids := map[string]*actor.PID{}
	for _, id := range []string{"plain", "a/b"} {
		pids[id] = pidOf(id)
		_, err := es.started(strings.Clone(id), pids[id])
		must(t, err)
	}
	for r := range es.byID.all() {
		shared := unsafe.StringData(r.id) == unsafe.StringData(childName(pids[r.id]))
		if shared != (r.id == "plain") {
			t.Fatalf("ID %q shares the PID's bytes: %v", r.id, shared)
		}
	}
	checkInvariants(t, es)
	for _, pid := range []*actor.PID{
		actor.NewPID("nonhost", "other/7/plain"),    // another parent's child of that name
		actor.NewPID("elsewhere", "region/7/plain"), // another node's
		actor.NewPID("nonhost", "region/7/a/b"),     // not a name EntityName gives
		actor.NewPID("nonhost", "region/7/nobody"),
	} {
		if id, ok := es.entityOf(pid); ok {
			t.Fatalf("%v taken for entity %q", pid, id)
		}
	}
	if _, err := es.started("x", actor.NewPID("nonhost", "region/7/y")); !errors.Is(err, errInvalidTransition) {
		t.Fatalf("started under another name: %v", err)
	}
	checkInvariants(t, es)
}

func TestWaitingMessages(t *testing.T) {
	w := newWaitingMessages(3)
	for i, since := range []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second)} {
		if err := w.add(bufferedMessage{message: i, since: since}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.add(bufferedMessage{message: 3}); !errors.Is(err, errWaitingFull) {
		t.Fatalf("fourth: %v", err)
	}
	cases := []struct {
		now  time.Time
		want []any
		left int
	}{
		{t0.Add(time.Second), nil, 3},
		{t0.Add(2500 * time.Millisecond), []any{0, 1}, 1},
		{t0.Add(2500 * time.Millisecond), nil, 1},
	}
	for i, c := range cases {
		var got []any
		for _, m := range w.expire(c.now, time.Second) {
			got = append(got, m.message)
		}
		if !reflect.DeepEqual(got, c.want) || w.len() != c.left {
			t.Fatalf("case %d: expired %v, %d left; want %v, %d", i, got, w.len(), c.want, c.left)
		}
	}
	if got := w.take(); len(got) != 1 || got[0].message != 2 || w.len() != 0 {
		t.Fatalf("take: %v, %d left", got, w.len())
	}
}

func TestRememberRetryDelay(t *testing.T) {
	cases := []struct {
		attempt int
		ceiling time.Duration
		want    time.Duration
	}{
		{1, 5 * time.Second, time.Second},
		{2, 5 * time.Second, 2 * time.Second},
		{3, 5 * time.Second, 4 * time.Second},
		{4, 5 * time.Second, 5 * time.Second},
		{100, 5 * time.Second, 5 * time.Second},
		{1, 200 * time.Millisecond, 200 * time.Millisecond},
		{0, 0, time.Second},
	}
	for _, c := range cases {
		if got := rememberRetryDelay(c.attempt, c.ceiling); got != c.want {
			t.Errorf("rememberRetryDelay(%d, %v) = %v, want %v", c.attempt, c.ceiling, got, c.want)
		}
	}
}

func TestLeaseName(t *testing.T) {
	cases := []struct{ typeName, shard, want string }{
		{"Account", "7", "shard-Account-7"},
		{"a/b", "c d", "shard-a%2Fb-c%20d"},
	}
	for _, c := range cases {
		if got := shardactor.LeaseName(c.typeName, c.shard); got != c.want {
			t.Errorf("LeaseName(%q, %q) = %q, want %q", c.typeName, c.shard, got, c.want)
		}
	}
}
