package messages

import (
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestIsProtocol(t *testing.T) {
	for _, tc := range []struct {
		msg  any
		want bool
	}{
		{&StartEntity{}, true},
		{&ShardingEnvelope{}, true},
		{&HandOverToMe{}, true}, // singleton.proto, same package
		// Reliable delivery's messages go to entities: not the region's.
		{&SequencedMessage{}, false},
		{&Request{}, false},
		{wrapperspb.String("x"), false},
		{"not proto", false},
		{nil, false},
	} {
		if got := IsProtocol(tc.msg); got != tc.want {
			t.Errorf("IsProtocol(%T) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
