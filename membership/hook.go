package membership

import (
	"context"
	"time"

	"github.com/protoshard/protoshard/internal/membershiphook"
)

func init() {
	membershiphook.Of = func(c any) membershiphook.Cluster { return libraryView{c.(*Cluster)} }
}

// libraryView is what the library reaches of a Cluster through
// membershiphook.Of: the bookkeeping sharding and singletons fence with,
// which users have no use for.
type libraryView struct{ c *Cluster }

func (v libraryView) CheckQuarantine() error { return v.c.checkQuarantine() }

func (v libraryView) SharedValue(key string, create func() any) (any, bool) {
	return v.c.sharedValue(key, create)
}

func (v libraryView) SelfRemoval() (membershiphook.Removal, bool) { return v.c.selfRemovalRecord() }

func (v libraryView) Removal(id string) (membershiphook.Removal, bool) { return v.c.removal(id) }

func (v libraryView) DownRemovalMargin() time.Duration { return v.c.downRemovalMargin() }

func (v libraryView) Stale() bool { return v.c.stale() }

func (v libraryView) RegisterLeaveHookIn(phase membershiphook.LeavePhase, name string, fn func(ctx context.Context) error) {
	v.c.registerLeaveHookIn(phase, name, fn)
}

func (v libraryView) HasConfiguredRole(role string) bool { return v.c.hasConfiguredRole(role) }
