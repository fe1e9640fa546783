package coordinator

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/messages"
)

// Helpers of the stash tests carry a "sh" prefix.

// shDescribe names a stashed message and its sender for comparisons.
func shDescribe(s stashed) string {
	switch m := s.message.(type) {
	case *messages.GetShardHome:
		return fmt.Sprintf("GetShardHome(%s) from %s", m.GetShard(), RegionKey(s.sender))
	case *messages.Register:
		return fmt.Sprintf("Register(%s, %s, %v)", RegionKey(m.GetShardRegion()), m.GetMemberId(), m.GetShards())
	}
	return fmt.Sprintf("%T", s.message)
}

func TestStash(t *testing.T) {
	r1, r2 := stRegion(1), stRegion(2)
	home := func(shard string) *messages.GetShardHome { return &messages.GetShardHome{Shard: shard} }
	type add struct {
		msg    any
		sender *actor.PID
		repeat bool
		full   bool
	}
	cases := []struct {
		name     string
		capacity int
		adds     []add
		want     []string
	}{
		{"kept in arrival order", 10, []add{
			{msg: home("a"), sender: r1},
			{msg: &messages.Register{ShardRegion: r2, MemberId: "m2"}, sender: r2},
			{msg: home("b"), sender: r1},
		}, []string{"GetShardHome(a) from 127.0.0.1:1/region", "Register(127.0.0.2:1/region, m2, [])", "GetShardHome(b) from 127.0.0.1:1/region"}},
		{"the same GetShardHome from the same region once", 10, []add{
			{msg: home("a"), sender: r1},
			{msg: home("b"), sender: r1},
			{msg: home("a"), sender: r1, repeat: true},
			{msg: home("a"), sender: r2},
		}, []string{"GetShardHome(a) from 127.0.0.1:1/region", "GetShardHome(b) from 127.0.0.1:1/region", "GetShardHome(a) from 127.0.0.2:1/region"}},
		{"a repeated Register takes the first one's place, with what it says now", 10, []add{
			{msg: &messages.Register{ShardRegion: r1, MemberId: "m1", Shards: []string{"x"}}, sender: r1},
			{msg: home("a"), sender: r1},
			{msg: &messages.Register{ShardRegion: r1, MemberId: "m1", Shards: []string{"x", "y"}}, sender: r1, repeat: true},
		}, []string{"Register(127.0.0.1:1/region, m1, [x y])", "GetShardHome(a) from 127.0.0.1:1/region"}},
		{"full: dropped, a repeat still replaces", 2, []add{
			{msg: home("a"), sender: r1},
			{msg: home("b"), sender: r1},
			{msg: home("c"), sender: r1, full: true},
			{msg: home("a"), sender: r1, repeat: true},
			{msg: &actor.Terminated{}, full: true},
		}, []string{"GetShardHome(a) from 127.0.0.1:1/region", "GetShardHome(b) from 127.0.0.1:1/region"}},
		{"messages without a key are all kept", 10, []add{
			{msg: &messages.ShardStarted{Shard: "a"}, sender: r1},
			{msg: &messages.ShardStarted{Shard: "a"}, sender: r1},
		}, []string{"*messages.ShardStarted", "*messages.ShardStarted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStash(tc.capacity)
			base := time.Unix(1000, 0)
			// A repeat keeps when the first of its kind came.
			firstAt := map[string]time.Time{}
			for i, a := range tc.adds {
				now := base.Add(time.Duration(i) * time.Second)
				if k := stashKey(a.msg, a.sender); k != "" && firstAt[k].IsZero() && !a.full {
					firstAt[k] = now
				}
				repeat, err := s.add(a.msg, a.sender, now)
				if repeat != a.repeat || (err != nil) != a.full {
					t.Fatalf("add #%d: repeat %v, error %v; want repeat %v, full %v", i, repeat, err, a.repeat, a.full)
				}
				if err != nil && !errors.Is(err, errStashFull) {
					t.Fatalf("add #%d: %v is not errStashFull", i, err)
				}
			}
			var got []string
			if s.len() != len(tc.want) {
				t.Fatalf("len %d, want %d", s.len(), len(tc.want))
			}
			for _, e := range s.take() {
				got = append(got, shDescribe(e))
				if at, ok := firstAt[stashKey(e.message, e.sender)]; ok && !e.at.Equal(at) {
					t.Fatalf("%s: came at %v, want the first one's %v", shDescribe(e), e.at, at)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("stash\n got %q\nwant %q", got, tc.want)
			}
			if rest := s.take(); len(rest) != 0 {
				t.Fatalf("take left %d messages", len(rest))
			}
			// Emptied, it takes a repeat as new.
			if repeat, err := s.add(tc.adds[0].msg, tc.adds[0].sender, base); repeat || err != nil {
				t.Fatalf("after take: repeat %v, %v", repeat, err)
			}
		})
	}
}
