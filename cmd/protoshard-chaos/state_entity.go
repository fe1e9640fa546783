package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/durablestate"
	"github.com/protoshard/protoshard/internal/testpb"
)

// stateEntityPrefix starts the IDs of the run's durable state entities:
// entities of the one entity type whose state lives in durablestate/consul.
// The at-most-once senders and the probes never address them.
const stateEntityPrefix = "st-"

// stateEntityID is the id of durable state entity i of the run.
func stateEntityID(i int) string { return fmt.Sprintf("%s%03d", stateEntityPrefix, i) }

// isStateEntity reports whether id names a durable state entity.
func isStateEntity(id string) bool { return strings.HasPrefix(id, stateEntityPrefix) }

// updateID names an update by its sender and the sender's sequence number
// for the entity, as the entity stores it.
func updateID(snd string, seq int64) string { return snd + "#" + strconv.FormatInt(seq, 10) }

// decodeUpdates decodes a durable state entity's payload: the list of the
// updates it applied, in order (nil payload: none yet).
func decodeUpdates(payload []byte) ([]string, error) {
	if len(payload) == 0 {
		return nil, nil
	}
	var ids []string
	if err := json.Unmarshal(payload, &ids); err != nil {
		return nil, fmt.Errorf("decoding the stored updates: %w", err)
	}
	return ids, nil
}

// stateEntity is the durable state part of an entity whose ID starts with
// stateEntityPrefix: it recovers its list of applied updates from the
// store when it starts (durablestate.Recover, which claims the record
// with a new token), appends each update request's (sender, seq) to it,
// persists the list, and answers only after the save succeeded. The
// ledger gets the claim, every accepted save with its token and revision,
// and every refused one; a refused save stops the incarnation (Persist
// does) without an answer.
type stateEntity struct {
	node, id, inc string
	ledger        *ledger
	// durable is nil until the recovery succeeded and after a save failed:
	// the incarnation is stopping and applies nothing more.
	durable *durablestate.Entity
	updates []string
}

func (s *stateEntity) recover(ctx actor.Context, store durablestate.Store) {
	d, payload, err := durablestate.Recover(ctx, store, s.id)
	var updates []string
	if err == nil {
		if updates, err = decodeUpdates(payload); err != nil {
			ctx.Stop(ctx.Self())
		}
	}
	if err != nil {
		s.ledger.write(Record{Ev: evSaveFailed, Ent: s.id, Inc: s.inc, Reason: "recover: " + err.Error()})
		return
	}
	s.durable, s.updates = d, updates
	s.ledger.write(Record{Ev: evClaim, Ent: s.id, Inc: s.inc, Token: d.Token(), Rev: d.Revision()})
}

// update applies one update request: the new list is persisted first, and
// only a saved update is recorded, kept and answered.
func (s *stateEntity) update(ctx actor.Context, p *testpb.Ping) {
	if s.durable == nil {
		return // stopping: the requester hears nothing, as from a dead node
	}
	next := append(slices.Clip(s.updates), updateID(p.From, p.Seq))
	payload, _ := json.Marshal(next) // a list of strings always encodes
	err := s.durable.Persist(ctx, payload)
	r := Record{Ent: s.id, Inc: s.inc, Token: s.durable.Token(), Snd: p.From, Seq: p.Seq}
	if err != nil {
		r.Ev, r.Reason = evSaveFailed, err.Error()
		if errors.Is(err, durablestate.ErrFenced) {
			r.Ev = evFencedSave
		}
		s.ledger.write(r)
		s.durable = nil
		return
	}
	s.updates = next
	r.Ev, r.Rev = evSave, s.durable.Revision()
	s.ledger.write(r)
	if ctx.Sender() != nil {
		ctx.Respond(&testpb.Pong{EntityId: p.EntityId, Seq: p.Seq, Node: s.node, Incarnation: s.inc})
	}
}
