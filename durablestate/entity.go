package durablestate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// storeTimeout bounds each store call of Recover and Persist; the entity
// waits for its store meanwhile, as Akka's DurableStateBehavior stashes
// its messages while it persists.
const storeTimeout = 5 * time.Second

// claimAttempts bounds the loads and claims of one Recover: a claim fails
// only when another write came in between (another incarnation claimed
// or saved), which a fresh load settles.
const claimAttempts = 3

// Entity is the durable state of one incarnation of an entity: the
// revision it last read or wrote, and its fencing token. An entity makes
// one with Recover when it starts, and saves its state with Persist.
//
// The token is the incarnation's: Recover claims the entity's record by
// writing it back with the stored token plus one, a check-and-set on the
// revision it read. The store orders the writes of one record, a claim
// succeeds only at the stored revision, and a stored token never goes
// down (a save with a lower one is refused), so every claim holds a token
// higher than every claim before it, in the order the incarnations
// started, whatever node each ran on: a shard moved from node A to B and
// back to A starts three incarnations with tokens n, n+1, n+2; the first,
// still running on a paused A, is refused (ErrFenced) at its next save
// once the second has claimed, and the second, cut off on B, once the
// third has. Sharding starts an entity's next incarnation only after it
// believes the previous one stopped, and never on a node whose membership
// is stale, so the incarnation that claimed last is the one sharding
// means to run. A store that loses its records (Consul restarted empty)
// counts the tokens from 1 again, and fences nothing from before.
//
// A token handed to the entity by its shard would not do without the
// coordinator's help: the epoch in HostShard is the coordinator's, the
// same for every shard it allocates, and a start counter kept by a shard
// lives on one node, so the incarnations on A and on B above could hold
// equal tokens.
//
// An Entity belongs to its actor; it is not safe for use by several
// goroutines.
type Entity struct {
	store    Store
	id       string
	revision uint64
	token    uint64
}

// Recover loads the durable state of the entity entityID from store for
// the incarnation whose actor context is ctx, claims it (see Entity), and
// returns it with the stored payload (nil when the entity has never been
// saved). Call it when the entity starts (on *actor.Started), before it
// handles a message; the ID of a sharded entity is
// actorsharding.EntityID(ctx).
//
// An entity without its state must not handle messages: when the store
// fails, Recover stops the entity (ctx.Stop(ctx.Self())), logs why, and
// returns the error; the entity starts again at its next message.
func Recover(ctx actor.Context, store Store, entityID string) (*Entity, []byte, error) {
	var err error
	for range claimAttempts {
		var rec Record
		if rec, err = call(func(c context.Context) (Record, error) { return store.Load(c, entityID) }); err != nil {
			break
		}
		var rev uint64
		rev, err = call(func(c context.Context) (uint64, error) {
			return store.Save(c, entityID, rec.Payload, rec.Revision, rec.Token+1)
		})
		if err == nil {
			return &Entity{store: store, id: entityID, revision: rev, token: rec.Token + 1}, rec.Payload, nil
		}
		if !errors.Is(err, ErrRevisionConflict) {
			break
		}
	}
	err = fmt.Errorf("recovering the durable state of entity %q: %w", entityID, err)
	ctx.Logger().Error("durable state: cannot recover; stopping the entity", slog.String("entity", entityID), slog.Any("error", err))
	ctx.Stop(ctx.Self())
	return nil, nil, err
}

// Persist saves payload as the entity's state, on the revision the
// incarnation read or wrote last and with its token.
//
// When the store refuses or fails, the entity stops (ctx.Stop(ctx.Self()),
// as Akka's DurableStateBehavior stops on a persist failure) and Persist
// returns the error: the incarnation no longer knows the stored revision,
// and after ErrFenced another incarnation runs. A fenced incarnation is
// logged at Warn (it is the outcome of a fault elsewhere, such as this
// node's pause), any other failure at Error. The entity must not act on
// the state it failed to save.
func (e *Entity) Persist(ctx actor.Context, payload []byte) error {
	rev, err := call(func(c context.Context) (uint64, error) {
		return e.store.Save(c, e.id, payload, e.revision, e.token)
	})
	if err == nil {
		e.revision = rev
		return nil
	}
	err = fmt.Errorf("persisting the durable state of entity %q at revision %d, token %d: %w", e.id, e.revision, e.token, err)
	level, msg := slog.LevelError, "durable state: cannot persist; stopping the entity"
	if errors.Is(err, ErrFenced) {
		level, msg = slog.LevelWarn, "durable state: a newer incarnation has saved; stopping this stale one"
	}
	ctx.Logger().Log(context.Background(), level, msg, slog.String("entity", e.id), slog.Any("error", err))
	ctx.Stop(ctx.Self())
	return err
}

// Revision returns the revision of the record this incarnation read or
// wrote last.
func (e *Entity) Revision() uint64 { return e.revision }

// Token returns this incarnation's fencing token, which grows from one
// incarnation of the entity to the next: the entity can pass it on as the
// fencing token of what it writes elsewhere.
func (e *Entity) Token() uint64 { return e.token }

// call runs one store call under storeTimeout.
func call[T any](f func(context.Context) (T, error)) (T, error) {
	c, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return f(c)
}
