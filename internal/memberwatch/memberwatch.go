// Package memberwatch holds what the membership providers' watches share.
package memberwatch

import (
	"slices"

	"github.com/protoshard/protoshard/membership"
)

// VanishedLeavers returns, as Leaving, the members that were Up in prev,
// are not in next and leftGracefully says left gracefully: a provider
// whose watcher missed their Leaving status (SetLeaving and Deregister
// fell between two deliveries) reports them Leaving first, so that their
// removal is seen as graceful rather than as a crash. leftGracefully is
// asked only about such vanished members.
func VanishedLeavers(prev, next []membership.Member, leftGracefully func(id string) bool) []membership.Member {
	var out []membership.Member
	for _, m := range prev {
		if m.Status != membership.Up || slices.ContainsFunc(next, func(n membership.Member) bool { return n.ID == m.ID }) {
			continue
		}
		if leftGracefully(m.ID) {
			m.Status = membership.Leaving
			out = append(out, m)
		}
	}
	return out
}
