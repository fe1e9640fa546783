// Package loss is the end of a lease holding, the same in every lease
// implementation: the holding's renewals stop, and its callback runs once
// when it is lost, never after a release.
package loss

import (
	"context"

	"github.com/protoshard/protoshard/lease"
)

// Holding is a holding's cancel and loss callback. It is guarded by its
// lease's mutex; the callback that Lose returns runs after that mutex is
// released, since it may call the lease.
type Holding struct {
	cancel context.CancelFunc // stops the renewals
	onLost lease.LostFunc
	ended  bool
}

// New is a holding whose renewals cancel stops, that calls onLost (if not
// nil) when it is lost.
func New(cancel context.CancelFunc, onLost lease.LostFunc) Holding {
	return Holding{cancel: cancel, onLost: onLost}
}

// Ended reports whether the holding was lost or released.
func (h *Holding) Ended() bool { return h.ended }

// Notify makes onLost the callback of a loss from now on (an Acquire of a
// lease already held).
func (h *Holding) Notify(onLost lease.LostFunc) { h.onLost = onLost }

// Lose ends the holding as lost and returns the callback to run: nil if
// there is none, or if the holding had ended already.
func (h *Holding) Lose() lease.LostFunc {
	onLost := h.onLost
	if h.End() {
		return nil
	}
	return onLost
}

// End ends the holding (a release): its renewals stop and no callback
// will run. It reports whether it had ended already (lost).
func (h *Holding) End() (wasEnded bool) {
	wasEnded = h.ended
	h.ended = true
	h.onLost = nil
	h.cancel()
	return wasEnded
}
