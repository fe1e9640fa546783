package testsupport

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/protoshard/protoshard/shardactor"
)

// RequireEntities fails t unless s remembers exactly want (in any order,
// repeats ignored) for shardID.
func RequireEntities(t *testing.T, s shardactor.RememberEntitiesStore, shardID string, want ...string) {
	t.Helper()
	got, err := s.GetEntities(context.Background(), shardID)
	require.NoError(t, err)
	want = slices.Clone(want)
	slices.Sort(want)
	want = slices.Compact(want)
	if len(want) == 0 {
		require.Empty(t, got, "shard %q", shardID)
		return
	}
	require.Equal(t, want, got, "shard %q", shardID)
}

// EntityIDs returns n distinct entity IDs, prefix-000000 onwards, in
// sorted order.
func EntityIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%06d", prefix, i)
	}
	return ids
}
