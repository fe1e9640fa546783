// Package metrics is protoshard's OpenTelemetry instrument set: one per
// actor system, on the system's MetricsProvider (actor.Config), as
// proto.actor's own metrics. Without a provider For returns nil, and
// every method of a nil value does nothing: the actors call them
// unconditionally and pay a nil check.
//
// Attributes are bounded: the entity type, the node (the actor system's
// address), a drop's reason class, an outcome or a singleton's state;
// never an entity or shard ID.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
	"github.com/protoshard/protoshard/internal/sysext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Scope is the instrumentation scope of protoshard's meter.
const Scope = "github.com/protoshard/protoshard"

// The instruments' names, as OpenTelemetry names them; the Prometheus
// exporter appends _total to counters and _seconds to the histograms.
const (
	NameShards              = "protoshard_region_shards"
	NameEntities            = "protoshard_region_entities"
	NameBuffered            = "protoshard_region_buffered_messages"
	NameDrops               = "protoshard_dropped_messages"
	NameHandOff             = "protoshard_handoff_duration"
	NameRebalance           = "protoshard_rebalance_duration"
	NameAllocations         = "protoshard_shard_allocations"
	NameStateWrites         = "protoshard_coordinator_state_writes"
	NameStateWriteTime      = "protoshard_coordinator_state_write_duration"
	NameSingletonState      = "protoshard_singleton_state"
	NameSingletonHandOv     = "protoshard_singleton_handover_duration"
	NameDeliverySent        = "protoshard_delivery_sent"
	NameDeliveryResent      = "protoshard_delivery_resent"
	NameDeliveryConfirmed   = "protoshard_delivery_confirmed"
	NameDeliveryUnconfirmed = "protoshard_delivery_unconfirmed"
	NameDeliveryBuffered    = "protoshard_delivery_buffered"
)

// secondsBuckets suit the durations measured here, from a local state
// write (under a millisecond) to a hand-off that times out (tens of
// seconds); the SDK's default boundaries are for milliseconds.
var secondsBuckets = metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

var extensionID = extensions.NextExtensionID()

// holder is the per-system extension; m is nil without a provider.
type holder struct{ m *Metrics }

func (*holder) ExtensionID() extensions.ExtensionID { return extensionID }

// For returns system's instrument set, created on first use; nil when the
// system has no MetricsProvider.
func For(system *actor.ActorSystem) *Metrics {
	return sysext.Get(system, extensionID, func() *holder {
		if system.Config == nil || system.Config.MetricsProvider == nil {
			return &holder{}
		}
		m, err := newMetrics(system)
		if err != nil {
			system.Logger().Error("protoshard metrics are off: cannot create the instruments", slog.Any("error", err))
			return &holder{}
		}
		return &holder{m: m}
	}).m
}

// Metrics is one actor system's instrument set.
type Metrics struct {
	system *actor.ActorSystem
	node   attribute.KeyValue

	drops          metric.Int64Counter
	handOff        metric.Float64Histogram
	rebalance      metric.Float64Histogram
	allocations    metric.Int64Counter
	stateWrites    metric.Int64Counter
	stateWriteTime metric.Float64Histogram
	handOver       metric.Float64Histogram
	sent           metric.Int64Counter
	resent         metric.Int64Counter
	confirmed      metric.Int64Counter

	mu         sync.Mutex
	types      map[string]*Type
	singletons map[string]*Singleton
	deliveries map[string]*Delivery
}

func newMetrics(system *actor.ActorSystem) (*Metrics, error) {
	meter := system.Config.MetricsProvider.Meter(Scope)
	m := &Metrics{
		system:     system,
		node:       attribute.String("node", system.Address()),
		types:      map[string]*Type{},
		singletons: map[string]*Singleton{},
		deliveries: map[string]*Delivery{},
	}
	var errs [16]error
	shards, e0 := meter.Int64ObservableGauge(NameShards, metric.WithUnit("{shard}"),
		metric.WithDescription("Shards hosted by the region of the entity type on this node"))
	entities, e1 := meter.Int64ObservableGauge(NameEntities, metric.WithUnit("{entity}"),
		metric.WithDescription("Entities running in the region of the entity type on this node"))
	buffered, e2 := meter.Int64ObservableGauge(NameBuffered, metric.WithUnit("{message}"),
		metric.WithDescription("Messages the region buffers while their shard's home is unknown or moving"))
	singletonState, e3 := meter.Int64ObservableGauge(NameSingletonState, metric.WithUnit("{state}"),
		metric.WithDescription("1 for the current state of each cluster singleton manager on this node"))
	m.drops, errs[4] = meter.Int64Counter(NameDrops, metric.WithUnit("{message}"),
		metric.WithDescription("Messages dropped with a dead-letter event, by reason class"))
	m.handOff, errs[5] = meter.Float64Histogram(NameHandOff, metric.WithUnit("s"), secondsBuckets,
		metric.WithDescription("Time a shard took to stop its entities for a hand-off, at the old home"))
	m.rebalance, errs[6] = meter.Float64Histogram(NameRebalance, metric.WithUnit("s"), secondsBuckets,
		metric.WithDescription("Time from the coordinator's start of a shard's hand-off to its end, by kind and outcome"))
	m.allocations, errs[7] = meter.Int64Counter(NameAllocations, metric.WithUnit("{shard}"),
		metric.WithDescription("Shard homes allocated by the coordinator (written to its state)"))
	m.stateWrites, errs[8] = meter.Int64Counter(NameStateWrites, metric.WithUnit("{write}"),
		metric.WithDescription("Writes of the coordinator state to its store, by outcome"))
	m.stateWriteTime, errs[9] = meter.Float64Histogram(NameStateWriteTime, metric.WithUnit("s"), secondsBuckets,
		metric.WithDescription("Latency of the coordinator's state writes"))
	m.handOver, errs[10] = meter.Float64Histogram(NameSingletonHandOv, metric.WithUnit("s"), secondsBuckets,
		metric.WithDescription("Time from becoming the oldest member to the singleton running here (hand-over or take-over)"))
	m.sent, errs[11] = meter.Int64Counter(NameDeliverySent, metric.WithUnit("{message}"),
		metric.WithDescription("Messages reliable delivery sent to their entities for the first time"))
	m.resent, errs[12] = meter.Int64Counter(NameDeliveryResent, metric.WithUnit("{message}"),
		metric.WithDescription("Messages reliable delivery sent again: lost, or the entity restarted or moved"))
	m.confirmed, errs[13] = meter.Int64Counter(NameDeliveryConfirmed, metric.WithUnit("{message}"),
		metric.WithDescription("Messages the entities confirmed to reliable delivery's producers"))
	unconfirmed, e14 := meter.Int64ObservableGauge(NameDeliveryUnconfirmed, metric.WithUnit("{message}"),
		metric.WithDescription("Messages reliable delivery's producers on this node sent and keep until confirmed"))
	deliveryBuffered, e15 := meter.Int64ObservableGauge(NameDeliveryBuffered, metric.WithUnit("{message}"),
		metric.WithDescription("Messages reliable delivery's producers on this node hold until their entity asks for more"))
	errs[0], errs[1], errs[2], errs[3], errs[14], errs[15] = e0, e1, e2, e3, e14, e15
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	_, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, t := range m.types {
			o.ObserveInt64(shards, t.shards.Load(), t.attrs)
			o.ObserveInt64(entities, t.entities.Load(), t.attrs)
			o.ObserveInt64(buffered, t.buffered.Load(), t.attrs)
		}
		for _, s := range m.singletons {
			if state := s.state.Load(); state != nil {
				o.ObserveInt64(singletonState, 1, metric.WithAttributes(s.name, m.node, attribute.String("state", *state)))
			}
		}
		for _, d := range m.deliveries {
			o.ObserveInt64(unconfirmed, d.unconfirmed.Load(), d.attrs)
			o.ObserveInt64(deliveryBuffered, d.buffered.Load(), d.attrs)
		}
		return nil
	}, shards, entities, buffered, singletonState, unconfirmed, deliveryBuffered)
	if err != nil {
		return nil, fmt.Errorf("register the gauges' callback: %w", err)
	}
	return m, nil
}

// Dropped counts a dropped message of the reason class reason.
func (m *Metrics) Dropped(reason string) {
	if m == nil {
		return
	}
	m.drops.Add(context.Background(), 1, metric.WithAttributes(m.node, attribute.String("reason", reason)))
}

// Type returns the instruments of entity type name on this node.
func (m *Metrics) Type(name string) *Type {
	if m == nil {
		return nil
	}
	return once(&m.mu, m.types, name, func() *Type {
		typ := attribute.String("type", name)
		t := &Type{m: m, typ: typ, attrs: metric.WithAttributeSet(attribute.NewSet(typ, m.node))}
		t.opts = []metric.RecordOption{t.attrs}
		t.addOpts = []metric.AddOption{t.attrs}
		for _, kind := range []string{"rebalance", "shutdown"} {
			for _, ok := range []bool{true, false} {
				outcome := "timeout"
				if ok {
					outcome = "ok"
				}
				t.rebalanceOpts[rebalanceKey(kind == "rebalance", ok)] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
					typ, m.node, attribute.String("kind", kind), attribute.String("outcome", outcome)))}
			}
		}
		return t
	})
}

// Singleton returns the instruments of the singleton manager name on this
// node.
func (m *Metrics) Singleton(name string) *Singleton {
	if m == nil {
		return nil
	}
	return once(&m.mu, m.singletons, name, func() *Singleton {
		attr := attribute.String("singleton", name)
		return &Singleton{m: m, name: attr, opts: []metric.RecordOption{metric.WithAttributes(attr, m.node)}}
	})
}

// once returns byName[name], made by create the first time, under mu.
func once[T any](mu *sync.Mutex, byName map[string]*T, name string, create func() *T) *T {
	mu.Lock()
	defer mu.Unlock()
	if v, ok := byName[name]; ok {
		return v
	}
	v := create()
	byName[name] = v
	return v
}

// Type is the instruments of one entity type on one node. The gauges are
// atomics the region and its shards set and the SDK reads at collection.
type Type struct {
	m        *Metrics
	typ      attribute.KeyValue
	attrs    metric.MeasurementOption
	opts     []metric.RecordOption
	addOpts  []metric.AddOption
	shards   atomic.Int64
	entities atomic.Int64
	buffered atomic.Int64

	rebalanceOpts [4][]metric.RecordOption
}

func rebalanceKey(isRebalance, ok bool) int {
	k := 0
	if isRebalance {
		k |= 2
	}
	if ok {
		k |= 1
	}
	return k
}

// Region sets the region's gauges: shards hosted, messages buffered.
func (t *Type) Region(shards, buffered int) {
	if t == nil {
		return
	}
	t.shards.Store(int64(shards))
	t.buffered.Store(int64(buffered))
}

// AddEntities changes the number of running entities by delta.
func (t *Type) AddEntities(delta int) {
	if t == nil {
		return
	}
	t.entities.Add(int64(delta))
}

// HandOff records how long a shard took to stop its entities for a
// hand-off.
func (t *Type) HandOff(d time.Duration) {
	if t == nil {
		return
	}
	t.m.handOff.Record(context.Background(), d.Seconds(), t.opts...)
}

// Rebalance records a hand-off seen from the coordinator: from its start
// to RebalanceDone. isRebalance: moved by the rebalance, else by a
// region's graceful shutdown; ok: done in time.
func (t *Type) Rebalance(d time.Duration, isRebalance, ok bool) {
	if t == nil {
		return
	}
	t.m.rebalance.Record(context.Background(), d.Seconds(), t.rebalanceOpts[rebalanceKey(isRebalance, ok)]...)
}

// Allocated counts a shard home allocation.
func (t *Type) Allocated() {
	if t == nil {
		return
	}
	t.m.allocations.Add(context.Background(), 1, t.addOpts...)
}

// StateWrite records a write of the coordinator state that took d, with
// its outcome, one of a small fixed set the coordinator names.
func (t *Type) StateWrite(d time.Duration, outcome string) {
	if t == nil {
		return
	}
	t.m.stateWrites.Add(context.Background(), 1, metric.WithAttributes(t.typ, t.m.node, attribute.String("outcome", outcome)))
	t.m.stateWriteTime.Record(context.Background(), d.Seconds(), t.opts...)
}

// Singleton is the instruments of one singleton manager.
type Singleton struct {
	m     *Metrics
	name  attribute.KeyValue
	opts  []metric.RecordOption
	state atomic.Pointer[string]
}

// State sets the manager's current state ("" once it has stopped).
func (s *Singleton) State(state string) {
	if s == nil {
		return
	}
	if state == "" {
		s.state.Store(nil)
		return
	}
	s.state.Store(&state)
}

// HandOver records how long the singleton took to run here after this
// node became the oldest.
func (s *Singleton) HandOver(d time.Duration) {
	if s == nil {
		return
	}
	s.m.handOver.Record(context.Background(), d.Seconds(), s.opts...)
}

// Delivery returns the reliable-delivery instruments of entity type name
// on this node, shared by the type's producers here.
func (m *Metrics) Delivery(name string) *Delivery {
	if m == nil {
		return nil
	}
	return once(&m.mu, m.deliveries, name, func() *Delivery {
		attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("type", name), m.node))
		return &Delivery{m: m, attrs: attrs, addOpts: []metric.AddOption{attrs}}
	})
}

// Delivery is the reliable-delivery instruments of one entity type on one
// node.
type Delivery struct {
	m           *Metrics
	attrs       metric.MeasurementOption
	addOpts     []metric.AddOption
	unconfirmed atomic.Int64
	buffered    atomic.Int64
}

// Counted adds to the sent, resent and confirmed counters.
func (d *Delivery) Counted(sent, resent, confirmed int64) {
	if d == nil {
		return
	}
	ctx := context.Background()
	if sent > 0 {
		d.m.sent.Add(ctx, sent, d.addOpts...)
	}
	if resent > 0 {
		d.m.resent.Add(ctx, resent, d.addOpts...)
	}
	if confirmed > 0 {
		d.m.confirmed.Add(ctx, confirmed, d.addOpts...)
	}
}

// Pending changes the unconfirmed and buffered gauges by the deltas: each
// producer adds its own changes, so the gauges sum the type's producers.
func (d *Delivery) Pending(unconfirmed, buffered int64) {
	if d == nil {
		return
	}
	d.unconfirmed.Add(unconfirmed)
	d.buffered.Add(buffered)
}
