package consulstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/proto"

	"github.com/protoshard/protoshard/actorsharding/delivery"
	"github.com/protoshard/protoshard/internal/consulkey"
	"github.com/protoshard/protoshard/internal/deliveryqueue"
	"github.com/protoshard/protoshard/internal/pathseg"
	"github.com/protoshard/protoshard/messages"
)

// maxQueueMessageBytes is the largest encoded messages.MessageSent the
// Consul durable producer queue stores: as defaultRememberMaxBucketBytes,
// a value base64 encoded in a transaction's JSON must fit Consul's
// txn_max_req_len (512 KiB by default). A producer with this queue refuses
// a larger message at Send (delivery.ErrMessageTooLarge).
const maxQueueMessageBytes = 360 << 10

// durableProducerQueuePrefix is the KV prefix (ending in '/') under which
// the queue of producerID for the entities of typeName of the cluster
// clusterName lives: protoshard/<cluster>/delivery/<type>/<producer>/.
func durableProducerQueuePrefix(clusterName, typeName, producerID string) string {
	return consulkey.Prefix(clusterName) + "delivery/" + typeName + "/" + pathseg.Escape(producerID) + "/"
}

// durableProducerQueue is the delivery.DurableProducerQueue of
// NewDurableProducerQueue.
type durableProducerQueue struct {
	prefix      string
	client      *api.Client
	clusterName string
	typeName    string
	producerID  string

	// closeTimeout bounds Close, which has no context of its own: a
	// controller stopping must not hang on an unreachable Consul.
	closeTimeout time.Duration

	mu         sync.Mutex
	ownerIndex uint64 // 0: not claimed
	content    *deliveryqueue.Content
}

// queueCloseTimeout bounds the owner key's deletion at Close; a claim
// left behind costs nothing, as the next holder takes it over.
const queueCloseTimeout = 5 * time.Second

var _ delivery.DurableProducerQueue = (*durableProducerQueue)(nil)

// NewDurableProducerQueue returns the queue of producerID for the entities
// of typeName of the cluster clusterName, in the Consul KV of client. Pass
// the cluster's own name, sharding.Cluster().Name(): a producer controller
// refuses a queue of another cluster or type
// (actorsharding.ErrStoreMismatch). typeName must be a clean key path and
// clusterName not empty, as for NewRememberEntitiesStore.
//
// The queue is a delivery.DurableProducerQueue in Consul KV,
// so that what a producer accepted survives its node.
//
// # Key layout
//
// Under protoshard/<cluster>/delivery/<type>/<producer>/:
//
//	owner                                   the holder's random ID (the claim)
//	entities/<escaped entity ID>/meta       messages.DurableProducerQueueEntity
//	entities/<escaped entity ID>/msg/<seq>  messages.MessageSent, seq as %020d
//
// Entity IDs are escaped as the remembered entities' shard IDs. One key
// per message keeps each value small whatever the window and the message
// size.
//
// # Claim and fencing
//
// LoadState writes a fresh holder ID to owner (a check-and-set on what it
// read), keeps the key's ModifyIndex, and reads the prefix. Every later
// write is a transaction that begins by checking that index, as the
// coordinator's state writes do: once another holder loaded the queue,
// this one's writes fail with delivery.ErrQueueFenced. A holder that
// crashed needs no release: the next one takes the claim over. A second
// LoadState of a value that loaded fails with delivery.ErrQueueFenced
// until it is closed, and Close deletes the owner key only if this value
// loaded it and no one claimed it since.
//
// # Writes
//
// StoreMessageSent sets one key per message (and the entity's meta for a
// new numbering, after deleting the keys of the one it replaces);
// StoreMessageConfirmed sets the meta and deletes the keys of the messages
// confirmed; Cleanup deletes the entity's keys. A write is checked against
// the content the holder loaded and wrote (a deliveryqueue.Content) before
// anything is sent; a write of more than 64 operations or
// defaultRememberMaxTxnBytes is split over several transactions, each
// checking the claim. A split write cut short leaves some of its keys
// written; the controller retries it, and writing a key again with the
// same value changes nothing. A new numbering's meta goes before the
// deletion of the keys of the one it replaces, so that a write cut short
// between them leaves either numbering whole to the next load (the old
// keys it left are of another incarnation, which a load ignores).
//
// # All or none
//
// A write that fits one transaction is stored all or none. A split one is
// not: Consul has no transaction over several requests, so when the claim
// is taken over between two of them (or Consul keeps failing there until
// the controller gives up), the transactions that went through stay. The
// controller then fails every Send of the batch with
// delivery.ErrQueueFenced (or delivery.ErrQueueFailed), yet the holder
// that loads next finds the messages of those transactions and delivers
// them. Such an error from Send therefore means "maybe stored", not "not
// stored": a caller that sends the message again through another
// producer may have it processed twice, unless the entity drops what it
// already processed. A split confirmation or cleanup cut short only means
// messages sent again, or numberings forgotten later.
//
// It is safe for concurrent use.
func NewDurableProducerQueue(client *api.Client, clusterName, typeName, producerID string) delivery.DurableProducerQueue {
	return newDurableProducerQueue(client, clusterName, typeName, producerID)
}

func newDurableProducerQueue(client *api.Client, clusterName, typeName, producerID string) *durableProducerQueue {
	return &durableProducerQueue{client: client, clusterName: clusterName, typeName: typeName, producerID: producerID,
		prefix: durableProducerQueuePrefix(clusterName, typeName, producerID), closeTimeout: queueCloseTimeout}
}

// ClusterName returns the name of the cluster whose producer the queue
// serves.
func (q *durableProducerQueue) ClusterName() string { return q.clusterName }

// TypeName returns the entity type the queue's messages go to.
func (q *durableProducerQueue) TypeName() string { return q.typeName }

// MaxMessageSentBytes is the largest encoded messages.MessageSent the
// queue stores, 360 KiB: a producer with this queue refuses a larger
// message at Send (delivery.ErrMessageTooLarge).
func (q *durableProducerQueue) MaxMessageSentBytes() int { return maxQueueMessageBytes }

func (q *durableProducerQueue) errorf(format string, args ...any) error {
	return fmt.Errorf("consul durable producer queue %s: "+format, append([]any{q.prefix}, args...)...)
}

func (q *durableProducerQueue) ownerKey() string { return q.prefix + "owner" }

func (q *durableProducerQueue) entityPrefix(entityID string) string {
	return q.prefix + "entities/" + pathseg.Escape(entityID) + "/"
}

func (q *durableProducerQueue) msgKey(entityID string, seq int64) string {
	return fmt.Sprintf("%smsg/%020d", q.entityPrefix(entityID), seq)
}

// LoadState implements delivery.DurableProducerQueue.
func (q *durableProducerQueue) LoadState(ctx context.Context) (*messages.DurableProducerQueueState, error) {
	if err := checkScope(q.clusterName, q.typeName); err != nil {
		return nil, q.errorf("load: %w", err)
	}
	if q.producerID == "" {
		return nil, q.errorf("load: empty producer ID")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ownerIndex != 0 {
		// This value holds (or held, until taken over) the claim: claiming
		// again would fence whoever loaded it first.
		return nil, q.errorf("load: loaded already: %w", delivery.ErrQueueFenced)
	}
	index, err := q.claim(ctx)
	if err != nil {
		return nil, q.errorf("load: %w", err)
	}
	content, err := q.read(ctx)
	if err != nil {
		return nil, q.errorf("load: %w", err)
	}
	q.ownerIndex, q.content = index, content
	return content.State(), nil
}

// claim writes a fresh holder ID to the owner key and returns the key's
// ModifyIndex with it.
func (q *durableProducerQueue) claim(ctx context.Context) (uint64, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	holder := []byte(hex.EncodeToString(b[:]))
	kv := q.client.KV()
	opts := (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx)
	pair, _, err := kv.Get(q.ownerKey(), opts)
	if err != nil {
		return 0, consulPermanence(err)
	}
	var index uint64
	if pair != nil {
		index = pair.ModifyIndex
	}
	ok, _, err := kv.CAS(&api.KVPair{Key: q.ownerKey(), Value: holder, ModifyIndex: index}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return 0, consulPermanence(err)
	}
	if !ok {
		return 0, fmt.Errorf("another holder claimed the queue at the same time: %w", delivery.ErrQueueFenced)
	}
	pair, _, err = kv.Get(q.ownerKey(), opts)
	if err != nil {
		return 0, consulPermanence(err)
	}
	if pair == nil || string(pair.Value) != string(holder) {
		return 0, fmt.Errorf("another holder claimed the queue right after: %w", delivery.ErrQueueFenced)
	}
	return pair.ModifyIndex, nil
}

// read lists the prefix, consistently, into the queue's content.
func (q *durableProducerQueue) read(ctx context.Context) (*deliveryqueue.Content, error) {
	pairs, _, err := q.client.KV().List(q.prefix+"entities/", (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return nil, consulPermanence(err)
	}
	metas := map[string]*messages.DurableProducerQueueEntity{}
	msgs := map[string][]*messages.MessageSent{}
	for _, p := range pairs {
		rest := strings.TrimPrefix(p.Key, q.prefix+"entities/")
		segment, tail, _ := strings.Cut(rest, "/")
		entityID, err := url.PathUnescape(segment)
		if err != nil || pathseg.Escape(entityID) != segment {
			return nil, fmt.Errorf("key %s: not an escaped entity ID", p.Key)
		}
		switch {
		case tail == "meta":
			var m messages.DurableProducerQueueEntity
			if err := proto.Unmarshal(p.Value, &m); err != nil || m.GetEntityId() != entityID {
				return nil, fmt.Errorf("key %s: not the entity's numbering (%v)", p.Key, err)
			}
			metas[entityID] = &m
		case strings.HasPrefix(tail, "msg/"):
			seq, err := strconv.ParseInt(strings.TrimPrefix(tail, "msg/"), 10, 64)
			var m messages.MessageSent
			if err == nil {
				err = proto.Unmarshal(p.Value, &m)
			}
			if err != nil || m.GetEntityId() != entityID || m.GetSeqNr() != seq {
				return nil, fmt.Errorf("key %s: not the entity's message %d (%v)", p.Key, seq, err)
			}
			msgs[entityID] = append(msgs[entityID], &m)
		default:
			return nil, fmt.Errorf("key %s: unknown key", p.Key)
		}
	}
	st := &messages.DurableProducerQueueState{}
	ids := make([]string, 0, len(metas))
	for id := range metas {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		meta := metas[id]
		st.Entities = append(st.Entities, meta)
		ms := msgs[id]
		sort.Slice(ms, func(i, j int) bool { return ms[i].GetSeqNr() < ms[j].GetSeqNr() })
		for _, m := range ms {
			if m.GetProducerIncarnation() == meta.GetProducerIncarnation() && m.GetSeqNr() > meta.GetConfirmedSeqNr() {
				st.Unconfirmed = append(st.Unconfirmed, m)
			}
		}
	}
	return deliveryqueue.New(st)
}

// write runs the operations plan returns while the queue is claimed, in
// transactions that each check the claim, and then commit.
func (q *durableProducerQueue) write(ctx context.Context, what string, plan func(*deliveryqueue.Content) (api.TxnOps, func(), error)) error {
	if err := ctx.Err(); err != nil {
		return q.errorf("%s: %w", what, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ownerIndex == 0 {
		return q.errorf("%s: not claimed (before LoadState or after Close)", what)
	}
	ops, commit, err := plan(q.content)
	if err != nil {
		return q.errorf("%s: %w", what, err)
	}
	if len(ops) == 0 {
		commit()
		return nil
	}
	check := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: q.ownerKey(), Index: q.ownerIndex}}}
	txns, err := packTxns(check, ops, defaultRememberMaxTxnBytes)
	if err != nil {
		return q.errorf("%s: %w", what, err)
	}
	for _, txn := range txns {
		ok, resp, _, err := q.client.Txn().Txn(txn, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return q.errorf("%s: %w", what, consulPermanence(err))
		}
		if !ok {
			var txnErrs api.TxnErrors
			if resp != nil {
				txnErrs = resp.Errors
			}
			return q.errorf("%s: %w", what, q.rolledBack(ctx, txnErrs))
		}
	}
	commit()
	return nil
}

// rolledBack explains a transaction that rolled back: fenced when the
// owner key changed, else Consul's reasons.
func (q *durableProducerQueue) rolledBack(ctx context.Context, txnErrs api.TxnErrors) error {
	what := describeTxnErrors(txnErrs)
	pair, _, err := q.client.KV().Get(q.ownerKey(), (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("transaction rolled back (%s), and reading the owner failed: %w", what, err)
	}
	if pair == nil || pair.ModifyIndex != q.ownerIndex {
		return fmt.Errorf("the owner key changed since this holder's claim: %w", delivery.ErrQueueFenced)
	}
	return fmt.Errorf("transaction rolled back: %s", what)
}

func (q *durableProducerQueue) metaOp(e *messages.DurableProducerQueueEntity) (*api.TxnOp, error) {
	value, err := proto.Marshal(e)
	if err != nil {
		return nil, err
	}
	return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: q.entityPrefix(e.GetEntityId()) + "meta", Value: value}}, nil
}

// StoreMessageSent implements delivery.DurableProducerQueue.
func (q *durableProducerQueue) StoreMessageSent(ctx context.Context, sent []*messages.MessageSent) error {
	for _, m := range sent {
		if n := proto.Size(m); n > maxQueueMessageBytes {
			return q.errorf("entity %q seqNr %d: %d bytes, over %d: %w", m.GetEntityId(), m.GetSeqNr(), n, maxQueueMessageBytes, delivery.ErrMessageTooLarge)
		}
	}
	return q.write(ctx, "store messages", func(c *deliveryqueue.Content) (api.TxnOps, func(), error) {
		ch, ops, err := q.planSent(c, sent)
		if err != nil {
			return nil, nil, err
		}
		return ops, func() { c.Commit(ch) }, nil
	})
}

// planSent checks a StoreMessageSent batch against c and returns the
// change and the operations that write it, in the order they must go.
func (q *durableProducerQueue) planSent(c *deliveryqueue.Content, sent []*messages.MessageSent) (deliveryqueue.Change, api.TxnOps, error) {
	ch, err := c.PlanSent(sent)
	if err != nil {
		return ch, nil, err
	}
	var ops api.TxnOps
	for _, m := range ch.Added {
		if m.GetSeqNr() == 1 {
			// A new numbering: its meta, then the deletion of the keys of
			// the one it replaces. Should the write be cut between two
			// transactions there, the old keys are of another incarnation,
			// which a load ignores; the other way round, the old meta would
			// be left without its messages.
			op, err := q.metaOp(&messages.DurableProducerQueueEntity{EntityId: m.GetEntityId(), ProducerIncarnation: m.GetProducerIncarnation()})
			if err != nil {
				return ch, nil, err
			}
			ops = append(ops, op)
			if _, _, held := c.Numbering(m.GetEntityId()); held {
				ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteTree, Key: q.entityPrefix(m.GetEntityId()) + "msg/"}})
			}
		}
		value, err := proto.Marshal(m)
		if err != nil {
			return ch, nil, err
		}
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: q.msgKey(m.GetEntityId(), m.GetSeqNr()), Value: value}})
	}
	return ch, ops, nil
}

// StoreMessageConfirmed implements delivery.DurableProducerQueue.
func (q *durableProducerQueue) StoreMessageConfirmed(ctx context.Context, confirmed []*messages.Confirmed) error {
	return q.write(ctx, "store confirmations", func(c *deliveryqueue.Content) (api.TxnOps, func(), error) {
		ch, err := c.PlanConfirmed(confirmed)
		if err != nil {
			return nil, nil, err
		}
		var ops api.TxnOps
		from := map[string]int64{} // confirmed before, per entity, as the batch goes
		for _, cf := range ch.Confirmed {
			id := cf.GetEntityId()
			before, ok := from[id]
			if !ok {
				_, before, _ = c.Numbering(id)
			}
			from[id] = cf.GetSeqNr()
			op, err := q.metaOp(&messages.DurableProducerQueueEntity{EntityId: id, ProducerIncarnation: cf.GetProducerIncarnation(),
				ConfirmedSeqNr: cf.GetSeqNr(), ConfirmedTimestampMs: cf.GetTimestampMs()})
			if err != nil {
				return nil, nil, err
			}
			ops = append(ops, op)
			for seq := before + 1; seq <= cf.GetSeqNr(); seq++ {
				ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: q.msgKey(id, seq)}})
			}
		}
		return ops, func() { c.Commit(ch) }, nil
	})
}

// Cleanup implements delivery.DurableProducerQueue.
func (q *durableProducerQueue) Cleanup(ctx context.Context, entityIDs []string) error {
	return q.write(ctx, "cleanup", func(c *deliveryqueue.Content) (api.TxnOps, func(), error) {
		held := c.Held(entityIDs)
		var ops api.TxnOps
		for _, id := range held {
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteTree, Key: q.entityPrefix(id)}})
		}
		return ops, func() { c.Cleanup(held) }, nil
	})
}

// Close implements delivery.DurableProducerQueue: it deletes the owner key
// if this holder still has the claim, waiting for Consul at most 5
// seconds; the claim is given up either way.
func (q *durableProducerQueue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ownerIndex == 0 {
		return nil
	}
	index := q.ownerIndex
	q.ownerIndex, q.content = 0, nil
	ctx, cancel := context.WithTimeout(context.Background(), q.closeTimeout)
	defer cancel()
	// Another holder's claim stays: a failed check-and-set is no error.
	_, _, err := q.client.KV().DeleteCAS(&api.KVPair{Key: q.ownerKey(), ModifyIndex: index}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return q.errorf("close: %w", err)
	}
	return nil
}
