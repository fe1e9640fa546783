package actorsharding

import (
	"testing"
	"time"

	"github.com/protoshard/protoshard/internal/shardingconfig"
)

// Each option that stands for a setting which only the removed Settings
// struct reached sets that setting, and nothing else it could be mixed up
// with.
func TestOptionsReachEverySetting(t *testing.T) {
	for name, tc := range map[string]struct {
		opt  Option
		want func(s shardingconfig.Settings) bool
	}{
		"graceful shutdown timeout": {WithGracefulShutdownTimeout(7 * time.Second), func(s shardingconfig.Settings) bool {
			return s.GracefulShutdownTimeout == 7*time.Second
		}},
		"waiting-for-state-timeout": {WithWaitingForStateTimeout(3 * time.Second), func(s shardingconfig.Settings) bool {
			return s.Coordinator.WaitingForStateTimeout == 3*time.Second && s.Shard.WaitingForStateTimeout == 3*time.Second &&
				s.Coordinator.UpdatingStateTimeout != 3*time.Second
		}},
		"updating-state-timeout": {WithUpdatingStateTimeout(9 * time.Second), func(s shardingconfig.Settings) bool {
			return s.Coordinator.UpdatingStateTimeout == 9*time.Second && s.Shard.UpdatingStateTimeout == 9*time.Second &&
				s.Coordinator.WaitingForStateTimeout != 9*time.Second
		}},
		"coordinator stash capacity": {WithCoordinatorStashCapacity(17), func(s shardingconfig.Settings) bool {
			return s.Coordinator.StashCapacity == 17
		}},
		"register wait timeout": {WithRegisterWaitTimeout(11 * time.Second), func(s shardingconfig.Settings) bool {
			return s.Coordinator.RegisterWaitTimeout == 11*time.Second
		}},
	} {
		s := shardingconfig.Default()
		tc.opt(&s)
		// WithDefaults keeps what the option set.
		if s = s.WithDefaults(); !tc.want(s) {
			t.Errorf("%s: settings %+v", name, s)
		}
	}
}
