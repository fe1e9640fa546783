package messages

import (
	"errors"
	"strings"
	"testing"
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
			if err != nil && !errors.Is(err, ErrInvalidID) {
				t.Fatalf("error %v does not wrap ErrInvalidID", err)
			}
		})
	}
}
