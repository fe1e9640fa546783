package management

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/membershiphook"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/messages"
)

// WithReadinessTypes makes readiness wait for the regions (or proxies) of
// these entity types: until each is started and registered with its
// coordinator, the node is "starting" (Akka's
// akka.cluster.sharding.healthcheck.names). Without it, readiness checks
// the regions and proxies started on the node when it is asked, so a node
// that has not started them yet may be ready.
func WithReadinessTypes(typeNames ...string) Option {
	return func(c *config) { c.readinessTypes = append(c.readinessTypes, typeNames...) }
}

// ReadinessHandler returns the readiness check of sharding's node, for a
// Kubernetes readiness probe: what NewHandler serves at /ready, to mount
// on its own (it answers GET and HEAD). See the package documentation.
func ReadinessHandler(sharding *actorsharding.Sharding, opts ...Option) http.Handler {
	return readOnly(newHandler(sharding.System(), sharding.Cluster(), regionsOf(sharding), opts).ready)
}

// LivenessHandler returns the liveness check of sharding's node, for a
// Kubernetes liveness probe: what NewHandler serves at /alive, to mount
// on its own (it answers GET and HEAD). See the package documentation.
func LivenessHandler(sharding *actorsharding.Sharding, opts ...Option) http.Handler {
	return readOnly(newHandler(sharding.System(), sharding.Cluster(), regionsOf(sharding), opts).alive)
}

// readOnly answers GET and HEAD with f, other methods with 405, as the
// routes of NewHandler's mux do.
func readOnly(f http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
			return
		}
		f(w, r)
	})
}

// ready answers /ready: 200 when ready, 503 otherwise.
func (h *handler) ready(w http.ResponseWriter, r *http.Request) {
	self := h.cluster.Self()
	m := memberState{ID: self.ID, Address: self.Address, Joined: self.ID != "", Leaving: h.cluster.Leaving(), Stale: membershiphook.Of(h.cluster).Stale()}
	if m.Joined {
		_, m.Removed = membershiphook.Of(h.cluster).Removal(self.ID)
	}
	regions := h.checkedRegions()
	views := make([]regionReadyView, len(regions))
	h.askEach(r.Context(), regions, func(i int, st *messages.ShardRegionStatus, err error) {
		views[i] = regionReadiness(regions[i].TypeName, regions[i].Proxy, st, err, self.ID)
	})
	v := readiness(m, views)
	writeJSON(w, statusCode(v.Status == readyStatus), v)
}

// alive answers /alive: 200 when alive, 503 otherwise.
func (h *handler) alive(w http.ResponseWriter, r *http.Request) {
	regions := h.regions()
	views := make([]partView, len(regions))
	system := make(chan partView, 1)
	go func() { system <- h.pingSystem(r.Context()) }()
	h.askEach(r.Context(), regions, func(i int, _ *messages.ShardRegionStatus, err error) {
		views[i] = regionLiveness(regions[i].TypeName, regions[i].Proxy, err)
	})
	v := liveness(<-system, views)
	writeJSON(w, statusCode(v.Status == aliveStatus), v)
}

func statusCode(ok bool) int {
	if ok {
		return http.StatusOK
	}
	return http.StatusServiceUnavailable
}

// checkedRegions are the regions readiness checks: those of
// WithReadinessTypes (one not started has no PID), else every region and
// proxy started.
func (h *handler) checkedRegions() []shardingadmin.Region {
	started := h.regions()
	if len(h.readinessTypes) == 0 {
		return started
	}
	out := make([]shardingadmin.Region, 0, len(h.readinessTypes))
	for _, name := range h.readinessTypes {
		info := shardingadmin.Region{TypeName: name}
		for _, r := range started {
			if r.TypeName == name {
				info = r
			}
		}
		out = append(out, info)
	}
	return out
}

// askEach asks every started region of regions for its status at once,
// and hands answer each one's answer or error, on the caller's goroutine
// after all have answered or timed out. A region without a PID (not
// started) gets neither.
func (h *handler) askEach(ctx context.Context, regions []shardingadmin.Region, answer func(i int, st *messages.ShardRegionStatus, err error)) {
	type result struct {
		st  *messages.ShardRegionStatus
		err error
	}
	results := make([]result, len(regions))
	var wg sync.WaitGroup
	for i, r := range regions {
		if r.PID == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := ask[*messages.ShardRegionStatus](ctx, h, r.PID, &messages.GetShardRegionStatus{})
			results[i] = result{st, err}
		}()
	}
	wg.Wait()
	for i, res := range results {
		answer(i, res.st, res.err)
	}
}

// healthPing is what pingSystem's actor answers.
type healthPing struct{}

var errSystemStopped = errors.New("the actor system is stopped")

// pingSystem checks that the actor system runs actors: a short-lived
// actor must answer in time.
func (h *handler) pingSystem(ctx context.Context) partView {
	if h.system.IsStopped() {
		return partView{Status: unresponsiveStatus, Error: errSystemStopped.Error()}
	}
	pid, err := h.system.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(healthPing); ok {
			c.Respond(healthPing{})
		}
	}), h.system.ProcessRegistry.NextId())
	if err != nil {
		return partView{Status: unresponsiveStatus, Error: err.Error()}
	}
	defer h.system.Root.Stop(pid)
	if _, err := ask[healthPing](ctx, h, pid, healthPing{}); err != nil {
		return partView{Status: unresponsiveStatus, Error: err.Error()}
	}
	return partView{Status: responsiveStatus}
}
