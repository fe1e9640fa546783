package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/messages"
)

// The coordinator's handling of Register and RegisterProxy: the
// registration of regions and proxies, what a region hosts when it
// registers, and the refusals.

// refusalLogInterval is how long the refused registrations after a logged
// one are only counted.
const refusalLogInterval = time.Minute

// onRegistration handles a Register or RegisterProxy: it registers the
// region or proxy (see planRegistration), adopts what a region hosts on
// its first Register here, and acknowledges once that is written.
func (c *coordinator) onRegistration(ctx actor.Context, msg any) {
	r, err := registrantOf(msg, c.regions.members)
	if err != nil {
		if errors.Is(err, errMemberNotLive) {
			err = c.holdEarly(ctx, msg, err)
		}
		if err != nil {
			c.reject(ctx, msg, err.Error())
		}
		return
	}
	p := planRegistration(c.state, r)
	switch {
	case p.replace != nil && r.proxy:
		c.proxyTerminated(ctx, p.replace)
	case p.replace != nil && !c.regionTerminated(ctx, p.replace, "re-registered by a new member incarnation"):
		return
	}
	if p.refuse != "" {
		c.refuseIncompatible(ctx, r.pid, p.refuse)
		return
	}
	if p.disagreement != "" {
		// Registered already and maybe hosting shards: refusing it now
		// would not stop its entities. Recorded, the disagreement makes
		// every region that registers later disagree with one of them.
		c.log.Error("shard coordinator: a region registered with an earlier coordinator has another extractor than the other regions", slog.String("region", RegionKey(r.pid)), slog.String("reason", p.disagreement))
	}
	if p.event != nil {
		u := update{event: p.event}
		if !p.record {
			u.then = func(ctx actor.Context) { c.registered(ctx, r) }
		}
		switch err := c.update(u); {
		case errors.Is(err, errStopped):
			return
		case err != nil && !p.record:
			c.reject(ctx, msg, err.Error())
			return
		}
	}
	if c.regions.register(r.member) && !r.proxy {
		c.adopt(ctx, r.pid, r.hosted)
	}
	if !r.proxy {
		c.hasAllRegionsRegistered()
	}
	// The acknowledgement and the homes go out once the registration and
	// what it adopted are written; the allocations after it go in the
	// same write.
	c.whenWritten(ctx, r.key(), func(ctx actor.Context) {
		ctx.Request(r.pid, &messages.RegisterAck{Coordinator: ctx.Self(), Epoch: c.epoch})
		ctx.Request(r.pid, shardHomesOf(c.writes.durable, c.epoch, &c.forwards))
	}, c.registrationRefused(msg, r.member, ctx.Sender()))
	if !r.proxy {
		c.allocateShardHomesForRememberEntities(ctx)
	}
}

// holdEarly holds msg, a registration from a member that the coordinator
// does not see live, until it does (see earlyRegistrationWait). It returns
// why msg is rejected instead: notLive when the member was removed, or
// that the hold is full.
func (c *coordinator) holdEarly(ctx actor.Context, msg any, notLive error) error {
	member := registrationMember(msg)
	if c.removed(member) {
		return notLive
	}
	repeat, err := c.early.add(msg, ctx.Sender(), time.Now())
	if err != nil {
		return fmt.Errorf("%w; holding it until the member shows up: %w", notLive, err)
	}
	if !repeat {
		c.log.Debug("shard coordinator: holding a registration until its member shows up live", slog.String("member", member),
			slog.String("message", fmt.Sprintf("%T", msg)))
	}
	return nil
}

// removed reports whether this node saw member removed.
func (c *coordinator) removed(member string) bool {
	_, seen := membershiphook.Of(c.cluster).Removal(member)
	return seen
}

// handleEarly handles the held registrations whose member is live now, and
// drops those whose member was removed or that waited too long (see
// fateOf); the others wait on.
func (c *coordinator) handleEarly(ctx actor.Context) {
	if c.stateName != StateActive || c.early.len() == 0 {
		return
	}
	now := time.Now()
	var ready []stashed
	for _, e := range c.early.take() {
		switch fate, why := fateOf(e, c.regions.isLive, c.removed, now, earlyRegistrationWait); fate {
		case earlyReady:
			ready = append(ready, e)
		case earlyDropped:
			c.drop(ctx, e.message, e.sender, why)
		default:
			_, _ = c.early.put(e) // it held e a moment ago: it has room
		}
	}
	c.handleAgain(ctx, ready)
}

// registered: the registration of r is written; it is watched from now on.
func (c *coordinator) registered(ctx actor.Context, r registrant) {
	ctx.Watch(r.pid)
	if !r.proxy {
		c.log.Debug("shard region registered", slog.String("region", RegionKey(r.pid)),
			slog.String("extractor", r.extractor.String()))
	}
}

// refuseIncompatible answers the Register or RegisterProxy of region, whose
// extractor differs from the registered regions', with RegisterRefused: it
// hosts nothing, and registers again at its retry interval, accepted once
// the regions it disagrees with are gone. Only a region that named its
// extractor is refused (see extractorDisagreement), so one that knows the
// answer.
func (c *coordinator) refuseIncompatible(ctx actor.Context, region *actor.PID, why string) {
	if d := c.refusals.Allow("", time.Now()); d.Log {
		c.log.Error("shard coordinator: refused the registration of a region whose message extractor differs from the registered regions'", slog.String("region", RegionKey(region)), slog.String("reason", why),
			slog.Int("refusals-not-logged", d.Suppressed))
	}
	ctx.Send(region, &messages.RegisterRefused{Coordinator: ctx.Self(), Reason: why})
}

// registrationRefused drops a Register or RegisterProxy whose registration
// is never written; its member adopts again on its next Register.
func (c *coordinator) registrationRefused(msg any, member string, sender *actor.PID) func(actor.Context, error) {
	return func(ctx actor.Context, err error) {
		c.regions.unregister(member)
		c.drop(ctx, msg, sender, fmt.Sprintf("the registration is not written: %v", err))
	}
}

// adopt allocates to region the shards it hosts that the state places
// nowhere or elsewhere (see adoptions).
func (c *coordinator) adopt(ctx actor.Context, region *actor.PID, hosted []string) {
	for _, a := range adoptions(*c.state, region, hosted, c.handOffs.waiting) {
		var old *actor.PID
		if a.from != "" {
			old = c.state.Regions[a.from].PID
			c.log.Error("shard coordinator: a registering region hosts a shard the state places elsewhere; moving it to the region that hosts it", slog.String("shard", a.shard), slog.String("region", RegionKey(region)), slog.String("state", a.from))
			if err := c.update(update{event: ShardHomeDeallocated{Shard: a.shard}}); err != nil {
				continue
			}
		} else {
			c.log.Warn("shard coordinator: adopting a shard that a registering region hosts and the state does not place (was the state store reset?)", slog.String("shard", a.shard), slog.String("region", RegionKey(region)))
		}
		shard := a.shard
		_ = c.update(update{event: ShardHomeAllocated{Shard: shard, Region: region}, then: func(ctx actor.Context) {
			c.hostShards.stop(shard)
			if old != nil {
				// The region the state named must not keep a copy running.
				c.tellShardHome(ctx, old, shard, region)
			}
		}})
	}
}
