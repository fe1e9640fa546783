package shard

import (
	"reflect"
	"testing"

	"github.com/protoshard/protoshard/shardactor"
)

func TestRecoveryBatches(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f", "g"}
	cases := []struct {
		name     string
		ids      []string
		strategy string
		n        int
		want     [][]string
	}{
		{"none", nil, shardactor.EntityRecoveryAll, 5, nil},
		{"all at once", ids, shardactor.EntityRecoveryAll, 5, [][]string{ids}},
		{"constant 3", ids, shardactor.EntityRecoveryConstant, 3, [][]string{{"a", "b", "c"}, {"d", "e", "f"}, {"g"}}},
		{"constant 1", ids[:3], shardactor.EntityRecoveryConstant, 1, [][]string{{"a"}, {"b"}, {"c"}}},
		{"constant more than there are", ids, shardactor.EntityRecoveryConstant, 10, [][]string{ids}},
		{"constant with a bad n is all", ids, shardactor.EntityRecoveryConstant, 0, [][]string{ids}},
		{"unknown strategy is all", ids, "sometimes", 2, [][]string{ids}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := recoveryBatches(c.ids, c.strategy, c.n)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("recoveryBatches = %v, want %v", got, c.want)
			}
			if len(c.ids) > 0 && &got[0][0] == &c.ids[0] {
				t.Fatal("the batches share the caller's slice")
			}
		})
	}
}
