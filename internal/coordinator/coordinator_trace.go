package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The coordinator's tracing spans, and the log lines and metrics of its
// rebalance rounds and hand-offs.

// startRound starts the span of a rebalance round that starts moves
// hand-offs; none (a nil span) for a round that starts none. A round's
// span is the parent of its hand-offs' spans.
func (c *coordinator) startRound(moves int) (context.Context, trace.Span) {
	if moves == 0 {
		return context.Background(), nil
	}
	return c.settings.Tracer.Start(context.Background(), "sharding.rebalance",
		trace.WithAttributes(attribute.String("sharding.type", c.typeName)))
}

// roundEnded ends round (if any), a rebalance round that started started
// hand-offs, and logs it and the rebalance it is part of (see
// rebalanceSummary); idle: the strategy wanted no move.
func (c *coordinator) roundEnded(round trace.Span, started int, idle bool) {
	if round != nil {
		round.SetAttributes(attribute.Int("sharding.shards", started), attribute.Int("sharding.in_progress", c.handOffs.len()))
		round.End()
	}
	if started > 0 {
		c.log.Debug("shard coordinator: rebalance round", slog.Int("shards", started),
			slog.Int("in-progress", c.handOffs.len()))
	}
	now := time.Now()
	switch event, total := c.rebalance.tick(started, idle && c.handOffs.len() == 0, now); event {
	case rebalanceBegan:
		c.log.Info("shard coordinator: rebalance started", slog.Int("shards", started))
	case rebalanceEnded:
		c.log.Info("shard coordinator: rebalance done", slog.Int("shards", total.shards),
			slog.Int("rounds", total.rounds), slog.Duration("took", total.took(now)))
	}
}

// startHandOffSpan starts the span of shard's hand-off from region from;
// parent is the context of its parent (a rebalance round's).
func (c *coordinator) startHandOffSpan(parent context.Context, shard string, from *actor.PID, isRebalance bool) trace.Span {
	_, span := c.settings.Tracer.Start(parent, "sharding.handoff", trace.WithAttributes(
		attribute.String("sharding.type", c.typeName), attribute.String("sharding.shard", shard),
		attribute.String("sharding.from", RegionKey(from)), attribute.Bool("sharding.rebalance", isRebalance)))
	return span
}

// handOffEnded records the end of the hand-off that started at started:
// ok tells whether the shard was handed off.
func (c *coordinator) handOffEnded(started handOffStart, ok bool) {
	c.metrics.Rebalance(time.Since(started.at), started.rebalance, ok)
	if !ok {
		started.span.SetStatus(codes.Error, "the hand-off did not complete within the hand-off timeout")
	}
	started.span.End()
}

// endUnfinished ends the spans of the hand-offs whose worker has not
// reported when the coordinator stops. Its worker stops with the
// coordinator; the next one starts the hand-off again.
func endUnfinished(unfinished []handOffStart) {
	for _, h := range unfinished {
		h.span.SetStatus(codes.Error, "the coordinator stopped")
		h.span.End()
	}
}
