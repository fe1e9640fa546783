package wire

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/protoshard/protoshard/messages"
)

func TestCheckIDs(t *testing.T) {
	cases := []struct {
		name  string
		check func(string) error
		id    string
		ok    bool
	}{
		{"shard", CheckShardID, "7", true},
		{"shard empty", CheckShardID, "", false},
		{"shard at the limit", CheckShardID, strings.Repeat("s", MaxShardIDLength), true},
		{"shard past the limit", CheckShardID, strings.Repeat("s", MaxShardIDLength+1), false},
		{"entity", CheckEntityID, "e-1/with/slashes", true},
		{"entity empty", CheckEntityID, "", false},
		{"entity past the limit", CheckEntityID, strings.Repeat("é", MaxEntityIDLength/2+1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(tc.id)
			if tc.ok != (err == nil) {
				t.Fatalf("check(%d bytes) = %v, want ok=%v", len(tc.id), err, tc.ok)
			}
			if err != nil && !errors.Is(err, messages.ErrInvalidID) {
				t.Fatalf("error %v does not wrap messages.ErrInvalidID", err)
			}
		})
	}
}

func TestIsProtocol(t *testing.T) {
	for _, tc := range []struct {
		msg  any
		want bool
	}{
		{&messages.StartEntity{}, true},
		{&messages.ShardingEnvelope{}, true},
		{&messages.HandOverToMe{}, true}, // singleton.proto, same package
		// Reliable delivery's messages go to entities: not the region's.
		{&messages.SequencedMessage{}, false},
		{&messages.Request{}, false},
		{wrapperspb.String("x"), false},
		{"not proto", false},
		{nil, false},
	} {
		if got := IsProtocol(tc.msg); got != tc.want {
			t.Errorf("IsProtocol(%T) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
