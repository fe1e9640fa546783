// Package management is Akka Management's HTTP cluster and sharding
// routes and health checks for protoshard: an http.Handler, mounted on the
// application's own mux (nothing listens by itself), that reports the
// members, each entity type's regions, shard map and coordinator, and the
// singletons' owners as JSON, serves a page that draws the shard map live,
// and answers Kubernetes readiness and liveness probes.
//
// Routes, relative to where the handler is mounted (all GET):
//
//	/                                   the shard-map page
//	/ready                              readiness: 200 when ready, else 503
//	/alive                              liveness: 200 when alive, else 503
//	/cluster/members                    the cluster's name and its members, oldest first
//	/cluster/singletons                 each singleton and its owner
//	/cluster/shards                     the entity types started on this node
//	/cluster/shards/{type}/regions      the regions' addresses (GetCurrentRegions)
//	/cluster/shards/{type}/stats        entities per shard and region (GetClusterShardingStats)
//	/cluster/shards/{type}/coordinator  the coordinator's node, shard homes and hand-offs
//	/cluster/shards/{type}/map          the shard map: nodes, shards, entity counts, hand-offs
//
// Queries go through this node's region (or proxy) of the type to the
// coordinator, each bounded by a time-out. An answer that does not come
// in time, or a region that knows no coordinator yet, is an HTTP 503 with
// a JSON body {"error": "..."}; an unknown type is a 404. (As in Akka, a
// region without a coordinator answers regions and stats with empty
// lists; the coordinator and map routes answer 503.) A singleton's
// owner is not asked: it is the oldest Up member of the singleton's role,
// where its ClusterSingletonManager runs it.
//
// The members, coordinator and map routes name the cluster
// (membership.Cluster.Name), under which its keys in Consul live.
//
// # Health checks
//
// /ready and /alive are Akka Management's readiness and liveness routes;
// ReadinessHandler and LivenessHandler serve the same checks on their own,
// to mount where the probes look. Both answer JSON with a "status", a
// "reason" when the check fails, and the details; HTTP 200 when it passes,
// 503 when not. Each query of a check is bounded by the time-out
// (WithTimeout, default DefaultTimeout): give the probe a timeoutSeconds
// above it.
//
// Readiness is Akka's ClusterShardingHealthCheck plus the node's
// membership: "ready" once the node has joined and each region and proxy
// started on it (or each type WithReadinessTypes names) has registered
// with its coordinator as this member. Otherwise, the first that applies:
//
//	starting  not joined yet
//	leaving   Leave was called: the node hands its shards off, or has left
//	removed   removed from the cluster, not joined again yet
//	stale     membership not confirmed within the failure detection
//	          timeout (paused or cut off): fenced, it hosts nothing
//	starting  a region has not registered yet
//
// Each region's entry has "registered" (now, with the coordinator's
// address and epoch) and a "status": registered; reregistering (it
// registered as this member and registers again with a coordinator that
// moves or restarts: still ready); registering (not yet as this member:
// not ready, as after the node joined again as a new member); notStarted;
// stopped; unresponsive. Proxies count: without a coordinator a proxy
// cannot route either. A region stays ready while it registers again
// because every region of the type is in the same state then: failing
// them all would take every node out of service at once (Akka's check,
// too, passes for good once it passed).
//
// Liveness is whether the process works: the actor system runs a
// short-lived actor that answers, and each region and proxy answers a
// status query (GetShardRegionStatus), in time; a region that has stopped
// (a graceful shutdown, or the node left) does not fail it. The cluster's
// state does not count: a stale, removed or leaving node, or a region
// without a coordinator, is alive, as restarting processes cannot cure a
// problem of the cluster and would only add to it.
package management

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	internalask "github.com/protoshard/protoshard/internal/ask"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/messages"
)

// DefaultTimeout bounds each query of a route unless WithTimeout says
// otherwise.
const DefaultTimeout = 3 * time.Second

//go:embed page
var page embed.FS

// Option configures NewHandler.
type Option func(*config)

type config struct {
	timeout        time.Duration
	singletons     []singletonSpec
	readinessTypes []string
}

type singletonSpec struct{ name, role string }

// WithTimeout bounds each query a route or health check makes (default
// DefaultTimeout).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithSingleton lists a cluster singleton of the application, started with
// singleton.StartManager(..., managerName, singleton.WithRole(role)), on
// /cluster/singletons. The coordinators of the entity types are listed
// without it.
func WithSingleton(managerName, role string) Option {
	return func(c *config) { c.singletons = append(c.singletons, singletonSpec{name: managerName, role: role}) }
}

// Errors of the routes: errUnavailable (wrapped) answers 503,
// errUnknownType 404.
var (
	errUnavailable   = errors.New("coordinator unavailable")
	errNoCoordinator = fmt.Errorf("%w: the region is not registered with a coordinator", errUnavailable)
	errUnknownType   = errors.New("no region or proxy of this entity type runs on this node")
)

type handler struct {
	system  *actor.ActorSystem
	cluster *membership.Cluster
	// regions lists the regions started on this node (Sharding.Regions).
	regions func() []shardingadmin.Region
	config
	mux *http.ServeMux
}

// NewHandler returns the admin handler of sharding's node. Mount it under
// a path ending in a slash, with that prefix stripped, for the page's
// relative links to resolve:
//
//	mux.Handle("/admin/", http.StripPrefix("/admin", management.NewHandler(sharding)))
func NewHandler(sharding *actorsharding.Sharding, opts ...Option) http.Handler {
	return newHandler(sharding.System(), sharding.Cluster(), regionsOf(sharding), opts)
}

// regionsOf lists the regions and proxies started on sharding's node.
func regionsOf(sharding *actorsharding.Sharding) func() []shardingadmin.Region {
	system := sharding.System()
	return func() []shardingadmin.Region { return shardingadmin.Regions(system) }
}

func newHandler(system *actor.ActorSystem, cluster *membership.Cluster, regions func() []shardingadmin.Region, opts []Option) *handler {
	h := &handler{system: system, cluster: cluster, regions: regions, config: config{timeout: DefaultTimeout}, mux: http.NewServeMux()}
	for _, o := range opts {
		o(&h.config)
	}
	h.mux.HandleFunc("GET /", servePage)
	h.mux.HandleFunc("GET /ready", h.ready)
	h.mux.HandleFunc("GET /alive", h.alive)
	h.mux.HandleFunc("GET /cluster/members", h.members)
	h.mux.HandleFunc("GET /cluster/singletons", h.singletons)
	h.mux.HandleFunc("GET /cluster/shards", h.types)
	h.mux.HandleFunc("GET /cluster/shards/{type}/regions", h.typeRoute(h.currentRegions))
	h.mux.HandleFunc("GET /cluster/shards/{type}/stats", h.typeRoute(h.stats))
	h.mux.HandleFunc("GET /cluster/shards/{type}/coordinator", h.typeRoute(h.coordinator))
	h.mux.HandleFunc("GET /cluster/shards/{type}/map", h.typeRoute(h.shardMap))
	return h
}

// servePage serves the embedded page's files, which sit in its folder
// "page".
func servePage(w http.ResponseWriter, r *http.Request) {
	in := r.Clone(r.Context())
	in.URL.Path, in.URL.RawPath = "/page"+r.URL.Path, ""
	http.FileServerFS(page).ServeHTTP(w, in)
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *handler) members(w http.ResponseWriter, _ *http.Request) {
	v := buildMembers(h.cluster.Members(), h.cluster.Self().ID)
	v.Cluster = h.cluster.Name()
	writeJSON(w, http.StatusOK, v)
}

// typeView is one entity type started on this node.
type typeView struct {
	Type  string `json:"type"`
	Proxy bool   `json:"proxy"` // this node hosts none of its shards
	Role  string `json:"role"`
}

func (h *handler) types(w http.ResponseWriter, _ *http.Request) {
	out := []typeView{}
	for _, r := range h.regions() {
		out = append(out, typeView{Type: r.TypeName, Proxy: r.Proxy, Role: r.Role})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) singletons(w http.ResponseWriter, _ *http.Request) {
	var specs []singletonSpec
	for _, r := range h.regions() {
		specs = append(specs, singletonSpec{name: shardingadmin.CoordinatorManagerName(r.TypeName), role: r.Role})
	}
	specs = append(specs, h.config.singletons...)
	writeJSON(w, http.StatusOK, buildSingletons(specs, h.cluster.Members(), h.cluster.Self().ID))
}

// typeRoute finds the region of the path's type and hands it to route,
// which answers with a value to encode or an error.
func (h *handler) typeRoute(route func(ctx context.Context, region shardingadmin.Region) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("type")
		for _, region := range h.regions() {
			if region.TypeName == name {
				v, err := route(r.Context(), region)
				if err != nil {
					writeError(w, name, err)
					return
				}
				writeJSON(w, http.StatusOK, v)
				return
			}
		}
		writeError(w, name, errUnknownType)
	}
}

// regionsView answers /cluster/shards/{type}/regions.
type regionsView struct {
	Type      string   `json:"type"`
	Addresses []string `json:"addresses"`
}

// currentRegions: the region answers an empty list while it has no
// coordinator, as Akka's does.
func (h *handler) currentRegions(ctx context.Context, region shardingadmin.Region) (any, error) {
	res, err := ask[*messages.CurrentRegions](ctx, h, region.PID, &messages.GetCurrentRegions{})
	if err != nil {
		return nil, err
	}
	return regionsView{Type: region.TypeName, Addresses: append([]string{}, res.GetAddresses()...)}, nil
}

// statsView answers /cluster/shards/{type}/stats.
type statsView struct {
	Type    string                     `json:"type"`
	Regions map[string]regionStatsView `json:"regions"` // by region address
}

type regionStatsView struct {
	Stats  map[string]int32 `json:"stats"`  // entities per shard
	Failed []string         `json:"failed"` // shards that did not answer in time
}

func (h *handler) stats(ctx context.Context, region shardingadmin.Region) (any, error) {
	st, err := h.askStats(ctx, region)
	if err != nil {
		return nil, err
	}
	out := statsView{Type: region.TypeName, Regions: map[string]regionStatsView{}}
	for addr, r := range st.GetRegions() {
		v := regionStatsView{Stats: r.GetStats(), Failed: r.GetFailed()}
		if v.Stats == nil {
			v.Stats = map[string]int32{}
		}
		if v.Failed == nil {
			v.Failed = []string{}
		}
		out.Regions[addr] = v
	}
	return out, nil
}

// askStats gives the coordinator part of the time-out to ask the regions,
// so that its answer, with the slow regions' shards as failed, still
// arrives in time.
func (h *handler) askStats(ctx context.Context, region shardingadmin.Region) (*messages.ClusterShardingStats, error) {
	return ask[*messages.ClusterShardingStats](ctx, h, region.PID,
		&messages.GetClusterShardingStats{TimeoutMillis: (h.timeout * 2 / 3).Milliseconds()})
}

// askCoordinator asks the coordinator through the region; a region with no
// coordinator answers with none.
func (h *handler) askCoordinator(ctx context.Context, region shardingadmin.Region) (*messages.ShardCoordinatorState, error) {
	st, err := ask[*messages.ShardCoordinatorState](ctx, h, region.PID, &messages.GetShardCoordinatorState{})
	if err != nil {
		return nil, err
	}
	if st.GetCoordinator() == nil {
		return nil, errNoCoordinator
	}
	return st, nil
}

// coordinatorStateView answers /cluster/shards/{type}/coordinator.
type coordinatorStateView struct {
	// Cluster is the cluster's name: the coordinator's state is stored
	// under it (actorsharding/consulstore.StateKey).
	Cluster string `json:"cluster"`
	Type    string `json:"type"`
	coordinatorView
	Regions             []regionRecordView `json:"regions"`
	Proxies             []regionRecordView `json:"proxies"`
	Unallocated         []string           `json:"unallocated"`
	RebalanceInProgress []string           `json:"rebalanceInProgress"`
}

type regionRecordView struct {
	Address  string   `json:"address"`
	MemberID string   `json:"memberId"`
	Shards   []string `json:"shards"` // in allocation order
}

func (h *handler) coordinator(ctx context.Context, region shardingadmin.Region) (any, error) {
	st, err := h.askCoordinator(ctx, region)
	if err != nil {
		return nil, err
	}
	v := buildCoordinatorState(region.TypeName, st)
	v.Cluster = h.cluster.Name()
	return v, nil
}

func buildCoordinatorState(typeName string, st *messages.ShardCoordinatorState) coordinatorStateView {
	records := func(rs []*messages.RegionRecord) []regionRecordView {
		out := make([]regionRecordView, 0, len(rs))
		for _, r := range rs {
			shards := r.GetShards()
			if shards == nil {
				shards = []string{}
			}
			out = append(out, regionRecordView{Address: r.GetRef().GetAddress(), MemberID: r.GetMemberId(), Shards: shards})
		}
		return out
	}
	v := coordinatorStateView{
		Type:                typeName,
		coordinatorView:     coordinatorView{MemberID: st.GetMemberId(), Address: st.GetCoordinator().GetAddress(), State: st.GetStateName(), Epoch: st.GetEpoch()},
		Regions:             records(st.GetState().GetRegions()),
		Proxies:             records(st.GetState().GetRegionProxies()),
		Unallocated:         sortedShardIDs(st.GetState().GetUnallocatedShards()),
		RebalanceInProgress: sortedShardIDs(st.GetRebalanceInProgress()),
	}
	if v.Unallocated == nil {
		v.Unallocated = []string{}
	}
	if v.RebalanceInProgress == nil {
		v.RebalanceInProgress = []string{}
	}
	return v
}

// shardMap asks for the coordinator's state and the stats at once.
func (h *handler) shardMap(ctx context.Context, region shardingadmin.Region) (any, error) {
	type statsAnswer struct {
		st  *messages.ClusterShardingStats
		err error
	}
	statsCh := make(chan statsAnswer, 1)
	go func() {
		st, err := h.askStats(ctx, region)
		statsCh <- statsAnswer{st, err}
	}()
	coord, err := h.askCoordinator(ctx, region)
	stats := <-statsCh
	if err != nil {
		return nil, err
	}
	if stats.err != nil {
		return nil, stats.err
	}
	m := buildShardMap(region.TypeName, h.cluster.Members(), h.cluster.Self().ID, coord, stats.st)
	m.Cluster = h.cluster.Name()
	return m, nil
}

// ask sends msg to pid and waits for an answer of type T, up to the
// handler's time-out or the request's end, whichever comes first (a
// client that goes away ends the wait).
func ask[T any](ctx context.Context, h *handler, pid *actor.PID, msg any) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	res, err := internalask.Request(ctx, h.system, pid, msg)
	if err != nil {
		return zero, fmt.Errorf("%w: %T to %s/%s (time-out %v): %w", errUnavailable, msg, pid.GetAddress(), pid.GetId(), h.timeout, err)
	}
	v, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("%T to %s/%s: unexpected answer %T", msg, pid.GetAddress(), pid.GetId(), res)
	}
	return v, nil
}

// errorView is the body of every error answer.
type errorView struct {
	Type  string `json:"type,omitempty"`
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, typeName string, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, errUnavailable):
		status = http.StatusServiceUnavailable
	case errors.Is(err, errUnknownType):
		status = http.StatusNotFound
	}
	writeJSON(w, status, errorView{Type: typeName, Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away: nothing left to tell it
}
