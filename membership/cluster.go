package membership

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/protoshard/protoshard/internal/expiring"
	"github.com/protoshard/protoshard/internal/membershiphook"
)

// ErrRemoved is returned by Join and Leave of a Cluster whose member was
// removed: removal is final, a removed incarnation never comes back.
var ErrRemoved = errors.New("membership: this member was removed from the cluster")

// Config configures a Cluster.
type Config struct {
	// Roles of this node (Akka's cluster roles).
	Roles []string
	// AfterRemoval is what a node does when it finds itself removed
	// without having left: failure detection gave up on it (it was paused
	// or cut off), or the backend lost its registration. Rejoin, the
	// default, joins again as a new member (a new ID and a new age) once
	// its subscribers were told of the removal; Terminate leaves the
	// cluster for good and calls OnTerminate.
	AfterRemoval AfterRemoval
	// Quarantine, when set, fences this node against removed members at
	// the remote layer: it must be the one installed in the node's remote
	// (Quarantine.RemoteOption). NewCluster puts it in front of the remote
	// in the actor system's process registry, to drop what is sent to a
	// removed member: create the Cluster before the node sends to others.
	// Nil: messages a removed member still sends are processed, and its
	// address is dialled again on demand.
	Quarantine *Quarantine
	// OnTerminate is called once, on its own goroutine, when a node with
	// AfterRemoval Terminate finds itself removed, after its subscribers
	// were told. The application should stop (Akka's
	// run-coordinated-shutdown-when-down with exit-jvm); the node's regions
	// and singletons have stopped hosting already. Nil: the removal is only
	// logged, and the node stays out of the cluster.
	OnTerminate func()
	// RejoinBackoff is the delay before a removed node joins again, and
	// the first delay between failed attempts (doubling up to 10x).
	// Default 1s.
	RejoinBackoff time.Duration
	// LeaveHookTimeout bounds each leave hook when the Leave context has no
	// deadline. Default 60s.
	LeaveHookTimeout time.Duration
	// DownRemovalMargin is Akka's down-removal-margin: after a member is
	// removed without a graceful leave (a crash, as failure detection sees
	// it), singletons and shards wait this long before they start again
	// elsewhere, so that a member that is only cut off has noticed its own
	// removal and stopped them. Zero: the provider's failure detection
	// timeout (Consul: the TTL; in-process membership: none). Negative: no
	// margin. A longer margin means a slower failover after a crash.
	DownRemovalMargin time.Duration
}

// AfterRemoval is what a node does once it finds itself removed without
// having left (see Config.AfterRemoval).
type AfterRemoval int

const (
	// Rejoin: join again as a new member (the default).
	Rejoin AfterRemoval = iota
	// Terminate: stay out of the cluster for good and call
	// Config.OnTerminate.
	Terminate
)

// String names the choice, for logs.
func (a AfterRemoval) String() string {
	switch a {
	case Rejoin:
		return "rejoin"
	case Terminate:
		return "terminate"
	}
	return fmt.Sprintf("AfterRemoval(%d)", int(a))
}

// LeaveHook runs during a graceful Leave, before the member is removed:
// regions hand off their shards, singletons hand over (in the phases of
// Akka's coordinated shutdown).
type LeaveHook func(ctx context.Context) error

// Cluster is one actor system's view of the cluster membership. It turns the
// Provider's snapshots into ordered events for subscribed actors.
type Cluster struct {
	system   *actor.ActorSystem
	provider Provider
	cfg      Config
	logger   *slog.Logger

	// member mirrors joined for Stale, which runs on every routed message;
	// everJoined is set at the first join.
	member     atomic.Bool
	everJoined atomic.Bool

	mu      sync.Mutex
	self    Member
	joined  bool
	leaving bool
	members []Member
	// removed: the member IDs seen removed, kept for removedRetention
	// (see removal): not accepted again meanwhile.
	removed     expiring.Set[membershiphook.Removal]
	selfRemoval *membershiphook.Removal // the last removal of this node's own member
	now         func() time.Time
	subscribers []*actor.PID
	hooks       []namedHook
	stopWatch   context.CancelFunc
	firstView   chan struct{}
	closed      bool
}

type namedHook struct {
	name  string
	phase membershiphook.LeavePhase
	fn    LeaveHook
}

// Name returns the cluster's name: its membership provider's (Provider.Name;
// with membership/consul the service name the members register as). What
// the cluster keeps in Consul lives under it, protoshard/<name>/..., so
// that clusters sharing one Consul keep apart: give the stores of
// actorsharding/consulstore and the leases of lease/consul this name.
//
// It is not configurable apart from the provider: the provider's name is
// what makes nodes members of one cluster, and a second name could
// disagree with it (two clusters of one name would share keys again).
func (c *Cluster) Name() string { return c.provider.Name() }

// sharedValue returns the value stored under key for every node of this
// process that shares the member list, creating it with create first if
// there is none. ok is false when the provider's members may run in other
// processes (it is not an InProcessProvider): no in-memory value can be
// shared with them.
func (c *Cluster) sharedValue(key string, create func() any) (value any, ok bool) {
	p, ok := c.provider.(membershiphook.InProcessProvider)
	if !ok {
		return nil, false
	}
	return p.SharedValue(key, create), true
}

// NewCluster creates the membership view of system over provider. It does
// not join yet: the system's remote must be started first, so its address is
// known. A provider with a UseLogger method (see Provider) logs through
// the system's logger from now on.
func NewCluster(system *actor.ActorSystem, provider Provider, cfg Config) *Cluster {
	if cfg.RejoinBackoff <= 0 {
		cfg.RejoinBackoff = time.Second
	}
	if cfg.LeaveHookTimeout <= 0 {
		cfg.LeaveHookTimeout = 60 * time.Second
	}
	if p, ok := provider.(membershiphook.LoggingProvider); ok {
		p.UseLogger(system.Logger())
	}
	c := &Cluster{
		system:   system,
		provider: provider,
		cfg:      cfg,
		logger:   system.Logger().With(slog.String("component", "membership")),
		now:      time.Now,
	}
	bound := c.removalBound()
	c.removed = expiring.NewSet[membershiphook.Removal](expiring.Window(removedRetention, bound), nil)
	if cfg.Quarantine != nil {
		cfg.Quarantine.install(system, expiring.Window(quarantineRetention, bound))
	}
	return c
}

// checkQuarantine reports whether this node keeps removed members out at
// the remote layer: nil when Config.Quarantine is set and its RemoteOption
// is in the remote config it went into, else an error wrapping
// ErrNoQuarantine that says what is missing. Without it, what a removed
// member still sends is processed, and the remote keeps dialling removed
// members' addresses.
func (c *Cluster) checkQuarantine() error {
	if c.cfg.Quarantine == nil {
		return fmt.Errorf("%w: membership.Config.Quarantine is nil", ErrNoQuarantine)
	}
	return c.cfg.Quarantine.checkInstalled()
}

// How long a node remembers a removed member, at least: Akka's
// prune-gossip-tombstones-after for the member IDs, and its
// remove-quarantined-association-after for the quarantine of their actor
// systems and addresses (see Quarantine). Each is raised to
// expiring.SafetyFactor times the provider's removal bound where that is
// longer (see removalBound).
const (
	removedRetention    = 24 * time.Hour
	quarantineRetention = time.Hour
)

// removalBound is the longest a removed member's leftovers can matter to
// this node: the down-removal margin, during which Removal must answer;
// the failure detection timeout, after which a member cut off has fenced
// itself; and how long its registration may still be reported live
// (RegistrationLinger), during which the removed set keeps it out of the
// view. A provider without a failure detector (in-process membership)
// never reports a removed member again: it has none of the two.
func (c *Cluster) removalBound() time.Duration {
	b := c.downRemovalMargin()
	if fd, ok := c.provider.(membershiphook.FailureDetector); ok {
		b = max(b, fd.FailureDetectionTimeout())
	}
	if l, ok := c.provider.(membershiphook.RegistrationLinger); ok {
		b = max(b, l.RegistrationLinger())
	}
	return b
}

// selfRemovalRecord returns the last removal of this node's own member, if it
// was removed (and possibly joined again since). A node that re-joined
// after a removal it did not ask for cannot know what its old incarnation's
// peers still run until the down-removal margin has passed since then.
func (c *Cluster) selfRemovalRecord() (membershiphook.Removal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.selfRemoval == nil {
		return membershiphook.Removal{}, false
	}
	return *c.selfRemoval, true
}

// removal returns what this node saw of the removal of member id; ok is
// false for a member this node never saw removed (one removed before it
// joined, or a live one), and for one removed so long ago that it was
// forgotten.
//
// A removed member is remembered, and its ID refused in the view, for 24
// hours (Akka's prune-gossip-tombstones-after), or for ten times the
// provider's removal bound if that is longer: the down-removal margin,
// which is all the sharding coordinator asks it for, and how long the
// provider may still report a removed member's registration live. With
// Consul that is one TTL (a refresh sent before the member fenced itself,
// handled late, passes its check again) plus DeregisterCriticalServiceAfter
// (then Consul deletes the registration, whose check stays critical: the
// member stopped refreshing it when it fenced itself) plus Consul's
// reaping and catalog sync (1.5 min); every later registration of the node
// has a new random ID. An ID forgotten after that cannot be reported live
// again. In-process membership never reports a removed member again.
func (c *Cluster) removal(id string) (r membershiphook.Removal, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removed.Get(id)
}

// downRemovalMargin is how long singletons and shards of a member removed
// without a graceful leave wait before they start elsewhere: see
// Config.DownRemovalMargin.
func (c *Cluster) downRemovalMargin() time.Duration {
	switch {
	case c.cfg.DownRemovalMargin > 0:
		return c.cfg.DownRemovalMargin
	case c.cfg.DownRemovalMargin < 0:
		return 0
	}
	if fd, ok := c.provider.(membershiphook.FailureDetector); ok {
		return max(fd.FailureDetectionTimeout(), 0)
	}
	return 0
}

// newMemberID returns a fresh random member id.
func newMemberID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Join registers this node as a new member and returns once the node sees
// itself in the cluster.
func (c *Cluster) Join(ctx context.Context) error {
	addr := c.system.Address()
	if addr == "" || addr == "nonhost" {
		return fmt.Errorf("membership: join needs a started remote (address is %q)", addr)
	}
	c.mu.Lock()
	if c.joined {
		c.mu.Unlock()
		return errors.New("membership: already joined")
	}
	if c.closed {
		c.mu.Unlock()
		return ErrRemoved
	}
	c.mu.Unlock()
	return c.join(ctx)
}

func (c *Cluster) join(ctx context.Context) error {
	self := Member{ID: newMemberID(), Address: c.system.Address(), Roles: c.cfg.Roles, Status: Up, SystemID: c.system.ID}
	registered, err := c.provider.Register(ctx, self)
	if err != nil {
		return fmt.Errorf("membership: join as %s: %w", self.ID, err)
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	first := make(chan struct{})
	c.mu.Lock()
	if c.closed {
		// Close or Leave ran while we registered (a re-join racing a
		// shutdown): do not come alive as a member nobody will ever stop.
		c.mu.Unlock()
		cancel()
		c.deregisterQuietly()
		return ErrRemoved
	}
	c.self = registered
	c.joined = true
	c.member.Store(true)
	c.everJoined.Store(true)
	c.leaving = false
	c.members = nil
	c.stopWatch = cancel
	c.firstView = first
	c.mu.Unlock()
	c.logger.Info("joining cluster", slog.String("member", registered.ID),
		slog.String("address", registered.Address), slog.Uint64("age", registered.Age))
	go c.provider.Watch(watchCtx, func(ms []Member) { c.onSnapshot(registered.ID, ms) })
	select {
	case <-first:
		return nil
	case <-ctx.Done():
		if !c.abandonJoin(registered.ID) {
			return nil // the first view arrived as the deadline passed
		}
		return fmt.Errorf("membership: waiting to see self %s in the cluster: %w", registered.ID, ctx.Err())
	}
}

// abandonJoin undoes a join whose first view did not arrive in time, so the
// registration and its watch do not linger as a member that no one owns (a
// re-join attempt would otherwise add one ghost member per failed attempt).
// It reports false if the first view was seen after all.
func (c *Cluster) abandonJoin(id string) bool {
	c.mu.Lock()
	current := c.joined && c.self.ID == id
	if current && c.firstViewSeen() {
		c.mu.Unlock()
		return false
	}
	if current {
		c.joined = false
		c.member.Store(false)
		c.stopWatch()
	}
	c.mu.Unlock()
	if current {
		c.deregisterQuietly()
	}
	return true
}

// deregisterQuietly removes the provider's registration, best effort: it is
// used where a lingering registration must not look alive and nobody is
// waiting for an error.
func (c *Cluster) deregisterQuietly() {
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.provider.Deregister(dctx)
}

// stale reports whether this node must not act as a member right now,
// although it joined once: it was removed (or left) and has not joined
// again, or it has not confirmed its membership within the provider's
// failure detection timeout (see Confirmer), so that the others may have
// removed it already although it has not noticed (it was paused or cut
// off). Regions and shards drop what they would deliver or forward
// meanwhile, with a reason: the node's actors may see the news of its
// removal only after messages that waited in their mailboxes. False before
// the first join (regions wait for it), and never stale by confirmation
// with a provider that does not confirm (in-process membership).
func (c *Cluster) stale() bool {
	if !c.everJoined.Load() {
		return false
	}
	if !c.member.Load() {
		return true
	}
	cf, ok := c.provider.(membershiphook.Confirmer)
	if !ok {
		return false
	}
	at, ok := cf.LastConfirmed()
	return ok && time.Since(at) >= cf.FailureDetectionTimeout()
}

// Leaving reports whether Leave was called: true from the start of its
// leave hooks, before the others see MemberLeft, and for good after (a
// Cluster that left never joins again). A health check reports such a node
// as not ready.
func (c *Cluster) Leaving() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaving
}

// Self returns this node's current member (zero before Join).
func (c *Cluster) Self() Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.self
}

// Members returns the live members (Up and Leaving), oldest first.
func (c *Cluster) Members() []Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ByAge(c.members, "", true)
}

// Subscribe makes pid receive CurrentClusterState, then every event.
func (c *Cluster) Subscribe(pid *actor.PID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subscribers = append(c.subscribers, pid)
	if c.joined && c.firstViewSeen() {
		c.system.Root.Send(pid, &CurrentClusterState{Members: ByAge(c.members, "", true), Self: c.self})
	}
}

// Unsubscribe stops events to pid.
func (c *Cluster) Unsubscribe(pid *actor.PID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.subscribers {
		if s.Equal(pid) {
			c.subscribers = append(c.subscribers[:i], c.subscribers[i+1:]...)
			return
		}
	}
}

// RegisterLeaveHook adds a hook that a graceful Leave runs (concurrently with
// the other hooks of its phase, Akka's cluster-exiting) between marking the
// member Leaving and removing it.
func (c *Cluster) RegisterLeaveHook(name string, fn LeaveHook) {
	c.registerLeaveHookIn(membershiphook.LeavePhaseExiting, name, fn)
}

// registerLeaveHookIn adds a hook that a graceful Leave runs in phase.
func (c *Cluster) registerLeaveHookIn(phase membershiphook.LeavePhase, name string, fn LeaveHook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hooks = append(c.hooks, namedHook{name: name, phase: phase, fn: fn})
}

// Leave leaves the cluster gracefully: the member becomes Leaving (others
// see MemberLeft), the leave hooks run (singletons hand over), then the
// member is removed. The Cluster cannot join again afterwards.
func (c *Cluster) Leave(ctx context.Context) error {
	c.mu.Lock()
	if !c.joined {
		// Removed (or never joined): still final, so that a pending
		// re-join after removal does not bring the node back.
		c.closed = true
		c.leaving = true
		c.mu.Unlock()
		return ErrRemoved
	}
	c.leaving = true
	c.closed = true // a graceful leave is final: no rejoin
	hooks := append([]namedHook(nil), c.hooks...)
	self := c.self
	c.mu.Unlock()

	c.logger.Info("leaving cluster", slog.String("member", self.ID))
	// As in Akka, the regions hand their shards off before the member
	// announces its leave: until then it stays the oldest for the others,
	// so its singletons (the coordinator among them) stay where they are
	// and finish the hand-offs they began.
	hookErrs := c.runLeaveHooks(ctx, membershiphook.LeavePhaseShardingShutdownRegion, hooks)
	if err := c.provider.SetLeaving(ctx); err != nil {
		c.logger.Warn("could not announce leaving; removing directly", slog.Any("error", err))
	}
	hookErrs = append(hookErrs, c.runLeaveHooks(ctx, membershiphook.LeavePhaseExiting, hooks)...)
	for _, err := range hookErrs {
		c.logger.Warn("leave hook failed", slog.Any("error", err))
	}
	derr := c.provider.Deregister(ctx)
	c.markSelfRemoved(true)
	if derr != nil {
		return fmt.Errorf("membership: deregister %s: %w", self.ID, derr)
	}
	return errors.Join(hookErrs...)
}

// runLeaveHooks runs the hooks of phase concurrently and returns their
// errors.
func (c *Cluster) runLeaveHooks(ctx context.Context, phase membershiphook.LeavePhase, hooks []namedHook) []error {
	var errs []error
	var wg sync.WaitGroup
	var errMu sync.Mutex
	for _, h := range hooks {
		if h.phase != phase {
			continue
		}
		wg.Add(1)
		go func(h namedHook) {
			defer wg.Done()
			hctx, cancel := ctx, context.CancelFunc(func() {})
			if _, ok := ctx.Deadline(); !ok {
				hctx, cancel = context.WithTimeout(ctx, c.cfg.LeaveHookTimeout)
			}
			defer cancel()
			if err := h.fn(hctx); err != nil {
				errMu.Lock()
				errs = append(errs, fmt.Errorf("leave hook %s: %w", h.name, err))
				errMu.Unlock()
			}
		}(h)
	}
	wg.Wait()
	return errs
}

// onSnapshot diffs a provider snapshot against the current view and
// publishes the events. Called from the provider's watch goroutine.
func (c *Cluster) onSnapshot(selfID string, snapshot []Member) {
	c.mu.Lock()
	if !c.joined || c.self.ID != selfID {
		c.mu.Unlock()
		return // a snapshot of an earlier incarnation's watch
	}
	selfSeen := false
	for _, m := range snapshot {
		if m.ID == selfID {
			selfSeen = true
		}
	}
	if !c.firstViewSeen() {
		if !selfSeen {
			c.mu.Unlock()
			return // our registration is not visible yet
		}
		c.members = c.filterRemoved(snapshot)
		for _, m := range c.members {
			c.admit(m)
		}
		close(c.firstView)
		for _, s := range c.subscribers {
			c.system.Root.Send(s, &CurrentClusterState{Members: ByAge(c.members, "", true), Self: c.self})
		}
		c.mu.Unlock()
		return
	}
	if !selfSeen {
		// During a graceful Leave our own Deregister makes us vanish too;
		// the watch may see that before Leave gets to markSelfRemoved, and
		// it must not be reported as a failure (Graceful=false).
		graceful := c.leaving
		c.mu.Unlock()
		if !graceful {
			c.logger.Warn("this member is no longer in the cluster: removed", slog.String("member", selfID))
		}
		c.markSelfRemoved(graceful)
		return
	}
	events := diff(c.members, c.filterRemoved(snapshot), nil)
	now := c.now()
	for _, e := range events {
		if e, ok := e.(MemberRemoved); ok {
			c.removed.Put(e.Member.ID, membershiphook.Removal{At: now, Graceful: e.Graceful}, now)
			if c.cfg.Quarantine != nil && e.Member.SystemID != c.system.ID {
				c.cfg.Quarantine.removed(e.Member, e.Graceful)
			}
		}
	}
	c.members = c.filterRemoved(snapshot)
	// After the removals: a live member may share an address or an actor
	// system with a removed one (a process restarted on its address, a
	// node that joined again), and the removal of the old one may come
	// with, or after, the new one's MemberUp. A live member is never
	// quarantined.
	for _, m := range c.members {
		c.admit(m)
	}
	for _, e := range events {
		c.logger.Info("member event", slog.String("event", fmt.Sprintf("%T", e)), slog.Any("member", eventMember(e)))
		c.publishLocked(e)
	}
	c.mu.Unlock()
}

// admit lifts the quarantine of a live member (a removed node that joined
// again, or a new process at a removed member's address).
func (c *Cluster) admit(m Member) {
	if c.cfg.Quarantine != nil {
		c.cfg.Quarantine.up(m)
	}
}

// markSelfRemoved tells subscribers this member is gone for good, stops the
// watch and, if configured, joins again as a new member.
func (c *Cluster) markSelfRemoved(graceful bool) {
	c.mu.Lock()
	if !c.joined {
		c.mu.Unlock()
		return
	}
	self := c.self
	self.Status = Leaving
	c.joined = false
	c.member.Store(false)
	now := c.now()
	c.removed.Put(self.ID, membershiphook.Removal{At: now, Graceful: graceful}, now)
	c.selfRemoval = &membershiphook.Removal{At: now, Graceful: graceful}
	if c.stopWatch != nil {
		c.stopWatch()
	}
	c.members = nil
	c.publishLocked(MemberRemoved{Member: self, Graceful: graceful})
	rejoin := !graceful && c.cfg.AfterRemoval == Rejoin && !c.closed
	terminate := !graceful && c.cfg.AfterRemoval == Terminate && !c.closed
	if terminate {
		c.closed = true // removal is final for this node: no join any more
	}
	c.mu.Unlock()
	if !graceful {
		// Best effort: a lingering registration must not look alive.
		c.deregisterQuietly()
	}
	if rejoin {
		go c.rejoinLoop()
	}
	if terminate {
		c.logger.Error("this member was removed from the cluster; it terminates (AfterRemoval is Terminate)", slog.String("member", self.ID))
		if c.cfg.OnTerminate != nil {
			go c.cfg.OnTerminate()
		}
	}
}

// rejoinLoop joins again as a new member. It waits RejoinBackoff before
// the first attempt too: the subscribers (regions, singleton managers)
// stop what they hosted meanwhile, and the others' removal margin runs.
func (c *Cluster) rejoinLoop() {
	backoff := c.cfg.RejoinBackoff
	time.Sleep(backoff)
	for {
		c.mu.Lock()
		closed := c.closed || c.system.IsStopped()
		c.mu.Unlock()
		if closed {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.join(ctx)
		cancel()
		if err == nil {
			return
		}
		c.logger.Warn("re-join as a new member failed; retrying", slog.Any("error", err), slog.Duration("backoff", backoff))
		time.Sleep(backoff)
		if backoff < 10*c.cfg.RejoinBackoff {
			backoff *= 2
		}
	}
}

// Close stops watching without a graceful leave (the node is shutting down
// hard, or crashed in a test). No event is published.
func (c *Cluster) Close() {
	c.mu.Lock()
	c.closed = true
	c.joined = false
	c.member.Store(false)
	if c.stopWatch != nil {
		c.stopWatch()
	}
	c.mu.Unlock()
	// Outside the lock: a provider's Close may wait for its goroutines, and
	// one of them may be blocked delivering a snapshot to onSnapshot.
	c.provider.Close()
}

func (c *Cluster) publishLocked(e any) {
	for _, s := range c.subscribers {
		c.system.Root.Send(s, e)
	}
}

func (c *Cluster) firstViewSeen() bool {
	if c.firstView == nil {
		return false
	}
	select {
	case <-c.firstView:
		return true
	default:
		return false
	}
}

// filterRemoved returns ms without the members seen removed.
func (c *Cluster) filterRemoved(ms []Member) []Member {
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		if !c.removed.Has(m.ID) {
			out = append(out, m)
		}
	}
	return out
}

func eventMember(e any) Member {
	switch e := e.(type) {
	case MemberUp:
		return e.Member
	case MemberLeft:
		return e.Member
	case MemberRemoved:
		return e.Member
	}
	return Member{}
}

// hasConfiguredRole reports whether this node joins (or joined) with role:
// unlike Self().HasRole it answers before the join too.
func (c *Cluster) hasConfiguredRole(role string) bool {
	if role == "" {
		return true
	}
	for _, r := range c.cfg.Roles {
		if r == role {
			return true
		}
	}
	return false
}
