package coordinator

import "time"

// rebalanceSummary follows one rebalance: from the first round that starts
// a hand-off until a round finds the allocation settled (the strategy
// moves nothing more and no hand-off is in progress). The coordinator
// logs an info line at each end and its rounds at debug level: a cluster
// that nears balance one shard per round would log an info line per shard.
// The zero value is no rebalance in progress.
type rebalanceSummary struct {
	since  time.Time
	rounds int
	shards int // hand-offs the rounds started
}

// rebalanceEvent is what a rebalance tick did to the rebalance in progress.
type rebalanceEvent int

const (
	rebalanceGoesOn rebalanceEvent = iota // nothing to report
	rebalanceBegan
	rebalanceEnded
)

// tick records a rebalance tick that started started hand-offs; settled:
// the strategy wanted no move and no hand-off is in progress. It returns
// what the tick did and, for rebalanceEnded, the rebalance's totals.
func (s *rebalanceSummary) tick(started int, settled bool, now time.Time) (rebalanceEvent, rebalanceSummary) {
	switch {
	case started > 0:
		event := rebalanceGoesOn
		if s.rounds == 0 {
			s.since, event = now, rebalanceBegan
		}
		s.rounds++
		s.shards += started
		return event, rebalanceSummary{}
	case settled && s.rounds > 0:
		done := *s
		*s = rebalanceSummary{}
		return rebalanceEnded, done
	}
	return rebalanceGoesOn, rebalanceSummary{}
}

// took is how long the rebalance has run by now.
func (s rebalanceSummary) took(now time.Time) time.Duration { return now.Sub(s.since) }
