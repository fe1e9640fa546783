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
		{wrapperspb.String("x"), false},
		{"not proto", false},
		{nil, false},
	} {
		if got := IsProtocol(tc.msg); got != tc.want {
			t.Errorf("IsProtocol(%T) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
