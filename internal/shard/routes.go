package shard

import (
	"github.com/asynkron/protoactor-go/actor"
)

// openRoute lets the region send to the running entity id (pid)
// directly, unless the active-entity limit needs to see every use.
func (s *shard) openRoute(id string, pid *actor.PID) {
	if s.routes == nil || s.limit.limit() > 0 {
		return
	}
	s.routes.Open(id, pid)
}

// closeRoute makes messages for id come through the shard again.
func (s *shard) closeRoute(id string) {
	if s.routes != nil {
		s.routes.Close(id)
	}
}

// closeAllRoutes closes every live entity's route.
func (s *shard) closeAllRoutes() {
	if s.routes == nil {
		return
	}
	for _, id := range s.entities.liveIDs() {
		s.routes.Close(id)
	}
}

// foldDirectUse counts what reached active entities directly as a use,
// for the idle check, and closes the routes nothing used since the check
// before: an idle entity keeps no route.
func (s *shard) foldDirectUse() {
	if s.routes == nil {
		return
	}
	for _, id := range s.entities.liveIDs() {
		if s.routes.TakeUsed(id) {
			s.entities.markUsed(id)
		} else {
			s.routes.Close(id)
		}
	}
}
