package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/shardproto"
	"github.com/protoshard/protoshard/messages"
	"github.com/protoshard/protoshard/shardactor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestIdleChecks(t *testing.T) {
	start := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	// A step uses an entity (use: its mark is checked) or runs a check.
	type step struct {
		use      uint32
		check    time.Time
		timeout  time.Duration
		idleUpTo uint32
		ok       bool
	}
	const minute = time.Minute
	steps := []step{
		{check: at(0), timeout: minute}, // no check ran a timeout ago
		{use: 1},
		{use: 2},
		{check: at(30 * time.Second), timeout: minute},
		{check: at(minute), timeout: minute, idleUpTo: 0, ok: true}, // exactly the timeout after the first check
		{use: 3},
		{check: at(90 * time.Second), timeout: minute, idleUpTo: 2, ok: true},
		{check: at(150*time.Second - time.Nanosecond), timeout: minute, idleUpTo: 2, ok: true}, // just under the timeout after the check that saw 3
		{check: at(150 * time.Second), timeout: minute, idleUpTo: 3, ok: true},
		{check: at(time.Hour), timeout: minute, idleUpTo: 3, ok: true},
		{check: at(2 * time.Hour), timeout: 0},            // off
		{check: at(3 * time.Hour), timeout: -time.Second}, // off
		{use: 4},
		{check: at(4 * time.Hour), timeout: minute, idleUpTo: 3, ok: true}, // the checks of an off timeout were not recorded
		{check: at(5 * time.Hour), timeout: minute, idleUpTo: 4, ok: true},
	}
	var c idleChecks
	for i, st := range steps {
		if st.use != 0 {
			require.Equal(t, st.use, c.use(), "step %d: mark", i)
			continue
		}
		upTo, ok := c.check(st.check, st.timeout)
		require.Equal(t, st.ok, ok, "step %d: ok", i)
		require.Equal(t, st.idleUpTo, upTo, "step %d: idle up to", i)
		require.LessOrEqual(t, len(c.recent), 4, "step %d: only the checks still needed are kept", i)
	}
}

// TestIdleChecksBounds runs the checks as the shard does (every timeout/2)
// with an entity started at every offset within a check interval and its
// last message at every offset after: it is passivated no earlier than
// timeout and no later than 1.5 × timeout after its last message.
func TestIdleChecksBounds(t *testing.T) {
	const timeout = 10 * time.Second
	interval := idleCheckInterval(timeout)
	first := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC) // of the checks
	for started := time.Duration(0); started < interval; started += interval / 5 {
		for offset := time.Duration(0); offset < 2*timeout; offset += interval / 10 {
			var c idleChecks
			startedAt := first.Add(started)
			last := startedAt.Add(offset) // the last message
			var mark uint32
			used := false
			for check := first; ; check = check.Add(interval) {
				if check.After(startedAt) && mark == 0 {
					mark = c.use() // started before this check
				}
				if !check.Before(last) && !used {
					mark, used = c.use(), true // the last message arrived before this check
				}
				upTo, ok := c.check(check, timeout)
				if !used || !ok || mark > upTo {
					require.Less(t, check.Sub(last), 2*timeout, "started %v, offset %v: never passivated", started, offset)
					continue
				}
				idleFor := check.Sub(last)
				require.GreaterOrEqual(t, idleFor, timeout, "started %v, offset %v: passivated early", started, offset)
				require.LessOrEqual(t, idleFor, timeout+timeout/2, "started %v, offset %v: passivated late", started, offset)
				break
			}
		}
	}
}

// TestIdleChecksRenumber: numbered again, the marks still in use and the
// checks compare as before.
func TestIdleChecksRenumber(t *testing.T) {
	start := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	c := idleChecks{uses: math.MaxUint32 - 10}
	marks := []uint32{c.use(), c.use()} // two entities used before the first check
	c.check(start, time.Minute)
	c.use() // an entity since passivated
	marks = append(marks, c.use())
	c.check(start.Add(30*time.Second), time.Minute)
	marks = append(marks, c.use())
	for c.use() < math.MaxUint32 {
	}
	require.True(t, c.full())
	c.renumber(marks)
	require.Equal(t, []idleCheck{{start, 2}, {start.Add(30 * time.Second), 3}}, c.recent)
	require.False(t, c.full())
	require.Equal(t, uint32(5), c.use(), "the next mark follows the renumbered ones")
	upTo, ok := c.check(start.Add(time.Minute), time.Minute)
	require.True(t, ok)
	require.Equal(t, uint32(2), upTo, "the two entities used before the first check are idle")
}

func TestIdleCheckInterval(t *testing.T) {
	tests := []struct {
		timeout, want time.Duration
	}{
		{120 * time.Second, 60 * time.Second}, // Akka's default-idle-strategy
		{300 * time.Millisecond, 150 * time.Millisecond},
		{time.Nanosecond, minIdleCheckInterval}, // never a busy loop
		{time.Millisecond, minIdleCheckInterval},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, idleCheckInterval(tt.timeout), "timeout %s", tt.timeout)
	}
}

func TestCountsAsActivity(t *testing.T) {
	tests := []struct {
		msg  any
		want bool
	}{
		{wrapperspb.String("user"), true},
		{"a plain Go value", true},
		{struct{}{}, true},
		{&messages.StartEntity{EntityId: "a"}, true},
		{&messages.Passivate{}, false},
		{&messages.HandOff{Shard: "1"}, false},
		{&messages.GetShardRegionStats{}, false},
		{(*messages.GracefulShutdown)(nil), false},
		{&shardproto.GetShardStats{}, false},
		{shardproto.GetCurrentShardState{}, false},
		{&shardproto.GetPassivationState{}, false},
		{shardproto.SetActiveEntityLimit{Limit: 1}, false},
		{&shardproto.Deliver{EntityID: "a", Message: "x"}, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, countsAsActivity(tt.msg), "%T", tt.msg)
	}
}

func TestNewReplacementPolicy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		want    any
		wantErr bool
	}{
		{"", &LeastRecentlyUsed{}, false},
		{shardactor.LeastRecentlyUsedPolicy, &LeastRecentlyUsed{}, false},
		{shardactor.SegmentedLeastRecentlyUsedPolicy, &SegmentedLeastRecentlyUsed{}, false},
		{"most-recently-used", nil, true},
	} {
		p, err := NewReplacementPolicy(tt.name, 7)
		if tt.wantErr {
			require.Error(t, err, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		require.IsType(t, tt.want, p, tt.name)
		require.Equal(t, 7, p.Limit(), tt.name)
	}
}

// op is one step of a replacement policy scenario: touch the IDs in order
// (each evicting what wantEvict lists at that step, in order), or set the
// limit, or remove.
type op struct {
	touch  []string
	limit  *int
	remove string
	// wantEvict: for a touch of several IDs, the evictions of each touch,
	// concatenated; for a limit, the evictions of SetLimit.
	wantEvict []string
	// wantActive, if not nil, is checked after the step.
	wantActive []string
}

func setLimit(n int) *int { return &n }

func ids(from, to int) []string {
	var out []string
	if from <= to {
		for i := from; i <= to; i++ {
			out = append(out, fmt.Sprint(i))
		}
		return out
	}
	for i := from; i >= to; i-- {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func cat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func runPolicy(t *testing.T, p ReplacementPolicy, ops []op) {
	t.Helper()
	for i, o := range ops {
		var got []string
		switch {
		case o.limit != nil:
			got = p.SetLimit(*o.limit)
		case o.remove != "":
			p.Remove(o.remove)
		default:
			for _, id := range o.touch {
				got = append(got, p.Touch(id)...)
			}
		}
		if len(got) == 0 {
			got = nil
		}
		require.Equal(t, o.wantEvict, got, "step %d: evicted", i)
		if o.wantActive != nil {
			require.Equal(t, o.wantActive, p.Active(), "step %d: active", i)
		}
		require.Equal(t, len(p.Active()), p.Len(), "step %d: Len", i)
	}
}

func TestLeastRecentlyUsed(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		ops   []op
	}{
		{
			name: "no limit keeps everyone, most recent last",
			ops: []op{
				{touch: []string{"a", "b", "c"}, wantActive: []string{"a", "b", "c"}},
				{touch: []string{"a"}, wantActive: []string{"b", "c", "a"}},
				{remove: "c", wantActive: []string{"b", "a"}},
				{remove: "unknown", wantActive: []string{"b", "a"}},
			},
		},
		{
			name:  "touch order decides who goes",
			limit: 3,
			ops: []op{
				{touch: []string{"a", "b", "c"}, wantActive: []string{"a", "b", "c"}},
				{touch: []string{"a"}, wantActive: []string{"b", "c", "a"}},
				{touch: []string{"d"}, wantEvict: []string{"b"}, wantActive: []string{"c", "a", "d"}},
				{touch: []string{"c", "e"}, wantEvict: []string{"a"}, wantActive: []string{"d", "c", "e"}},
			},
		},
		{
			name:  "limit lowered, raised, removed",
			limit: 4,
			ops: []op{
				{touch: []string{"a", "b", "c", "d"}},
				{limit: setLimit(2), wantEvict: []string{"a", "b"}, wantActive: []string{"c", "d"}},
				{limit: setLimit(3), wantActive: []string{"c", "d"}},
				{touch: []string{"e", "f"}, wantEvict: []string{"c"}, wantActive: []string{"d", "e", "f"}},
				{limit: setLimit(0), wantActive: []string{"d", "e", "f"}},
				{touch: []string{"g", "h"}, wantActive: []string{"d", "e", "f", "g", "h"}},
				{limit: setLimit(-5), wantActive: []string{"d", "e", "f", "g", "h"}},
				{limit: setLimit(1), wantEvict: []string{"d", "e", "f", "g"}, wantActive: []string{"h"}},
				{touch: []string{"h"}, wantActive: []string{"h"}},
			},
		},
		{
			// Pekko's LeastRecentlyUsedSpec, shard 1's view: the per-region
			// limit of 10 shared by 1, 2, then 3 shards; Passivate from an
			// entity is a Remove.
			name:  "Pekko LeastRecentlyUsedSpec, shard 1",
			limit: 10,
			ops: []op{
				{touch: ids(1, 20), wantEvict: ids(1, 10), wantActive: ids(11, 20)},
				{limit: setLimit(5), wantEvict: ids(11, 15), wantActive: ids(16, 20)},
				{touch: ids(1, 20), wantEvict: cat(ids(16, 20), ids(1, 15)), wantActive: ids(16, 20)},
				{limit: setLimit(3), wantEvict: []string{"16", "17"}, wantActive: []string{"18", "19", "20"}},
				{remove: "19", wantActive: []string{"18", "20"}},
				{touch: []string{"11", "12", "13"}, wantEvict: []string{"18", "20"}, wantActive: []string{"11", "12", "13"}},
			},
		},
		{
			// Pekko's LeastRecentlyUsedLimitAdjustmentSpec, shard 1: region
			// limit 10 over 2 shards (5), then 6 (3), then 12 (6).
			name:  "Pekko LeastRecentlyUsedLimitAdjustmentSpec, shard 1",
			limit: 10,
			ops: []op{
				{touch: ids(1, 20), wantEvict: ids(1, 10)},
				{limit: setLimit(5), wantEvict: ids(11, 15)},
				{limit: setLimit(3), wantEvict: []string{"16", "17"}, wantActive: ids(18, 20)},
				{touch: ids(1, 10), wantEvict: cat(ids(18, 20), ids(1, 7)), wantActive: ids(8, 10)},
				{limit: setLimit(6)},
				{touch: ids(11, 20), wantEvict: ids(8, 14), wantActive: ids(15, 20)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewLeastRecentlyUsed(tt.limit)
			require.Equal(t, tt.limit, p.Limit())
			runPolicy(t, p, tt.ops)
		})
	}
}

func TestLeastRecentlyUsedZeroValue(t *testing.T) {
	var p LeastRecentlyUsed
	require.Equal(t, 0, p.Len())
	require.Empty(t, p.Active())
	p.Remove("x")
	require.Empty(t, p.Touch("a"))
	require.Empty(t, p.SetLimit(0), "no limit: nothing evicted")
	require.Equal(t, []string{"a"}, p.Active())
}

func TestSegmentLimits(t *testing.T) {
	tests := []struct {
		limit       int
		proportions []float64
		want        []int
	}{
		{10, []float64{0.2, 0.8}, []int{2, 8}},
		{5, []float64{0.2, 0.8}, []int{1, 4}},
		{2, []float64{0.2, 0.8}, []int{1, 1}},
		{1, []float64{0.2, 0.8}, []int{1, 0}}, // the lowest level gets the leftover
		{0, []float64{0.2, 0.8}, []int{0, 0}},
		{10, []float64{1}, []int{10}},
		{10, []float64{0.5, 0.3, 0.2}, []int{5, 3, 2}},
		{7, []float64{0.1, 0.3, 0.6}, []int{1, 2, 4}},
		// adds up to 1 only within rounding: the lowest level still gets 1
		{10, []float64{1e-12, 1}, []int{1, 9}},
		{1, []float64{1e-12, 1}, []int{1, 0}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, segmentLimits(tt.limit, tt.proportions), "limit %d, %v", tt.limit, tt.proportions)
	}
}

func TestSegmentedLeastRecentlyUsedProportions(t *testing.T) {
	for _, tt := range []struct {
		proportions []float64
		ok          bool
	}{
		{nil, true},
		{[]float64{1}, true},
		{[]float64{0.2, 0.8}, true},
		{[]float64{0.1, 0.2, 0.7}, true},
		{[]float64{0, 1}, false},
		{[]float64{-0.2, 1.2}, false},
		{[]float64{0.5, 0.4}, false},
		{[]float64{math.NaN(), 1}, false},
		{[]float64{math.Inf(1)}, false},
	} {
		_, err := NewSegmentedLeastRecentlyUsed(10, tt.proportions...)
		require.Equal(t, tt.ok, err == nil, "%v: %v", tt.proportions, err)
	}
}

func TestSegmentedLeastRecentlyUsed(t *testing.T) {
	tests := []struct {
		name        string
		limit       int
		proportions []float64
		ops         []op
	}{
		{
			name:  "reused entities outlive one-off ones (LRU would evict a)",
			limit: 2,
			ops: []op{
				{touch: []string{"a", "a", "b"}, wantActive: []string{"b", "a"}},
				{touch: []string{"c"}, wantEvict: []string{"b"}, wantActive: []string{"c", "a"}},
				{touch: []string{"d"}, wantEvict: []string{"c"}, wantActive: []string{"d", "a"}},
			},
		},
		{
			name:  "one level is plain LRU",
			limit: 3, proportions: []float64{1},
			ops: []op{
				{touch: []string{"a", "b", "c", "a", "d"}, wantEvict: []string{"b"}, wantActive: []string{"c", "a", "d"}},
			},
		},
		{
			name: "no limit: reuse still promotes; a limit set later keeps the reused",
			ops: []op{
				{touch: []string{"a", "b", "c", "d", "a", "b"}, wantActive: []string{"c", "d", "a", "b"}},
				// limit 2: level 0 gets 1, level 1 gets 1; a is demoted
				// behind d, then c and d go.
				{limit: setLimit(2), wantEvict: []string{"c", "d"}, wantActive: []string{"a", "b"}},
			},
		},
		{
			name:  "remove from either level",
			limit: 4,
			ops: []op{
				{touch: []string{"a", "b", "a", "c"}, wantActive: []string{"b", "c", "a"}},
				{remove: "a", wantActive: []string{"b", "c"}},
				{remove: "b", wantActive: []string{"c"}},
			},
		},
		{
			// Pekko's SegmentedLeastRecentlyUsedSpec, shard 1: limit 10
			// (levels 2 and 8), then 5 (levels 1 and 4) when a second shard
			// starts.
			name:  "Pekko SegmentedLeastRecentlyUsedSpec, shard 1",
			limit: 10,
			ops: []op{
				{touch: ids(1, 20), wantEvict: ids(1, 10), wantActive: ids(11, 20)},
				// a second use promotes; level 1 overflows into level 0
				{touch: ids(11, 20), wantActive: cat(ids(11, 12), ids(13, 20))},
				// new entities cycle through level 0
				{touch: ids(1, 5), wantEvict: cat(ids(11, 12), ids(1, 3)), wantActive: cat(ids(4, 5), ids(13, 20))},
				{limit: setLimit(5), wantEvict: []string{"4", "5", "13", "14", "15"}, wantActive: ids(16, 20)},
				{touch: ids(20, 11), wantEvict: cat([]string{"20"}, ids(15, 12)), wantActive: []string{"11", "19", "18", "17", "16"}},
			},
		},
		{
			// Pekko's SegmentedLeastRecentlyUsedLimitAdjustmentSpec, shard
			// 1: region limit 20; 2 shards (10); region limit 10 (5); 30
			// (15).
			name:  "Pekko SegmentedLeastRecentlyUsedLimitAdjustmentSpec, shard 1",
			limit: 20,
			ops: []op{
				{touch: ids(1, 30), wantEvict: ids(1, 10), wantActive: ids(11, 30)},
				{limit: setLimit(10), wantEvict: ids(11, 20), wantActive: ids(21, 30)},
				{limit: setLimit(5), wantEvict: ids(21, 25), wantActive: ids(26, 30)},
				{touch: ids(1, 10), wantEvict: cat(ids(26, 30), ids(1, 5)), wantActive: ids(6, 10)},
				{limit: setLimit(15)},
				{touch: ids(11, 30), wantEvict: ids(6, 15), wantActive: ids(16, 30)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewSegmentedLeastRecentlyUsed(tt.limit, tt.proportions...)
			require.NoError(t, err)
			require.Equal(t, tt.limit, p.Limit())
			runPolicy(t, p, tt.ops)
		})
	}
}

func TestSegmentedLeastRecentlyUsedZeroValue(t *testing.T) {
	var p SegmentedLeastRecentlyUsed
	require.Empty(t, p.Active())
	p.Remove("x")
	require.Empty(t, p.Touch("a"))
	require.Empty(t, p.Touch("a"))
	require.Empty(t, p.Touch("b"))
	require.Equal(t, []string{"b", "a"}, p.Active(), "a was promoted")
	require.Equal(t, []string{"b"}, p.SetLimit(1))
	require.Equal(t, 1, p.Len())
}

// TestTrackMatchesAPolicyThatSawEveryUse: a policy built from the
// entities' use marks and counts is the policy that saw every use, for
// both policies the shard builds, and so passivates the same entities
// when a limit comes.
func TestTrackMatchesAPolicyThatSawEveryUse(t *testing.T) {
	for _, name := range []string{shardactor.LeastRecentlyUsedPolicy, shardactor.SegmentedLeastRecentlyUsedPolicy} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for round := range 50 {
				seen, err := NewReplacementPolicy(name, 0)
				require.NoError(t, err)
				es := newEntities(false, 100)
				for range rng.IntN(200) {
					id := fmt.Sprint(rng.IntN(20))
					if es.state(id) == noState {
						_, err := es.started(id, actor.NewPID("nonhost", "shard/"+id))
						require.NoError(t, err)
					}
					require.True(t, es.markUsed(id))
					seen.Touch(id)
				}
				built, err := NewReplacementPolicy(name, 0)
				require.NoError(t, err)
				track(built, es.activeUses())
				require.Equal(t, seen.Active(), built.Active(), "round %d", round)
				limit := 1 + rng.IntN(10)
				require.Equal(t, seen.SetLimit(limit), built.SetLimit(limit), "round %d: passivated for limit %d", round, limit)
			}
		})
	}
}

func TestActiveEntityLimit(t *testing.T) {
	es := newEntities(false, 100)
	for _, id := range []string{"a", "b", "c"} {
		_, err := es.started(id, actor.NewPID("nonhost", "shard/"+id))
		require.NoError(t, err)
		es.markUsed(id)
	}
	es.markUsed("a") // b is now the least recently used
	calls := 0
	active := func() []entityUse { calls++; return es.activeUses() }

	l, err := newActiveEntityLimit(shardactor.SegmentedLeastRecentlyUsedPolicy, 0)
	require.NoError(t, err)
	require.Nil(t, l.touch("a"), "no limit: nothing tracked")
	l.remove("a")
	require.Equal(t, 0, l.policy.Len())
	require.Equal(t, []string{"b", "c", "a"}, l.order(active), "a used twice: protected")
	require.Nil(t, l.setLimit(0, active))
	require.Equal(t, 1, calls, "a limit of 0 tracks nothing")
	require.Equal(t, 0, l.limit())

	require.Equal(t, []string{"b"}, l.setLimit(2, active), "the first limit: tracked from the records")
	require.Equal(t, 2, calls)
	require.Equal(t, 2, l.limit())
	require.Equal(t, []string{"c", "a"}, l.order(active))
	require.Equal(t, 2, calls, "tracked: the policy knows")
	require.Equal(t, []string{"c"}, l.touch("d"))
	require.Nil(t, l.setLimit(0, active), "back to no limit")
	l.remove("a")
	require.Equal(t, []string{"d"}, l.order(active), "still tracked")
	require.Equal(t, 2, calls)

	// A limit from the settings: tracked from the start.
	l, err = newActiveEntityLimit(shardactor.LeastRecentlyUsedPolicy, 1)
	require.NoError(t, err)
	require.Nil(t, l.touch("a"))
	require.Equal(t, []string{"a"}, l.touch("b"))

	// An unknown policy: the default, with the error to log.
	l, err = newActiveEntityLimit("nope", 1)
	require.Error(t, err)
	require.IsType(t, &LeastRecentlyUsed{}, l.policy)
	require.Equal(t, []string{"a"}, append(l.touch("a"), l.touch("b")...))
	require.Equal(t, []string{"b"}, l.order(active))
	require.LessOrEqual(t, len(defaultSegmentProportions), maxCountedUses, "uses counted for every level")
}
