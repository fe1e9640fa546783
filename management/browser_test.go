package management_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/chromedp/chromedp"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/internal/coordinator"
	"github.com/protoshard/protoshard/internal/shardingadmin"
	"github.com/protoshard/protoshard/internal/testpb"
	"github.com/protoshard/protoshard/management"
	"github.com/protoshard/protoshard/singleton"
	"github.com/protoshard/protoshard/testkit"
)

var screenshot = flag.String("screenshot", "", "write a PNG of the shard-map page, taken during a hand-off, to this path")

// chromium returns the Chromium (or Chrome) binary to drive: $PROTOSHARD_CHROMIUM,
// else one on PATH. Without one the test is skipped, except in CI
// (CI=true), where a missing browser is a broken set-up (scripts/test.sh
// installs it).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROTOSHARD_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("PROTOSHARD_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium (PROTOSHARD_CHROMIUM unset, none on PATH); CI must provide it (scripts/test.sh installs it when run as root with apt-get)")
	}
	t.Skip("no Chromium (PROTOSHARD_CHROMIUM unset, none on PATH): install Chromium or set PROTOSHARD_CHROMIUM to run this test")
	return ""
}

// pageNode is a node column as the page shows it.
type pageNode struct {
	Member  string      `json:"member"`
	Address string      `json:"address"`
	Shards  []pageShard `json:"shards"`
}

type pageShard struct {
	ID       string `json:"id"`
	Entities int    `json:"entities"`
	HandOff  bool   `json:"handoff"`
}

// readPage is what the browser shows: the node columns and their boxes.
const readPage = `Array.from(document.querySelectorAll("section.node")).map(n => ({
  member: n.dataset.member, address: n.dataset.address,
  shards: Array.from(n.querySelectorAll(".shard")).map(s => ({
    id: s.dataset.shard, entities: Number(s.dataset.entities), handoff: s.dataset.handoff === "true"}))}))`

type browser struct {
	ctx context.Context
}

func (b browser) nodes(t *testing.T) []pageNode {
	t.Helper()
	var out []pageNode
	if err := chromedp.Run(b.ctx, chromedp.Evaluate(readPage, &out)); err != nil {
		t.Fatalf("read the page: %v", err)
	}
	return out
}

// placement is shard -> member id, and the shards marked handing off.
func placement(nodes []pageNode) (homes map[string]string, handOffs []string, entities map[string]int) {
	homes, entities = map[string]string{}, map[string]int{}
	for _, n := range nodes {
		for _, s := range n.Shards {
			homes[s.ID] = n.Member
			entities[s.ID] = s.Entities
			if s.HandOff {
				handOffs = append(handOffs, s.ID)
			}
		}
	}
	sort.Strings(handOffs)
	return homes, handOffs, entities
}

// coordinatorHomes is the coordinator's own view (shard -> member id, and
// the shards being handed off), asked locally on the node that runs it.
func coordinatorHomes(c *testkit.Cluster) (map[string]string, []string, bool) {
	oldest := c.Oldest("")
	if oldest == nil {
		return nil, nil, false
	}
	pid := actor.NewPID(oldest.Address(), shardingadmin.CoordinatorManagerName(typeName)+"/singleton/coordinator")
	res, err := oldest.System.Root.RequestFuture(pid, &coordinator.GetCoordinatorState{}, 5*time.Second).Result()
	st, ok := res.(*coordinator.CurrentCoordinatorState)
	if err != nil || !ok || st.Name != coordinator.StateActive {
		return nil, nil, false
	}
	homes := map[string]string{}
	for _, r := range st.State.Regions {
		for _, s := range r.Shards {
			homes[s] = r.MemberID
		}
	}
	return homes, st.RebalanceInProgress, true
}

const (
	typeName = "Counter"
	shards   = 30
)

// holdStop is the entities' hand-off stop message: an entity stops only
// once the test releases it, so a hand-off stays in progress meanwhile.
type holdStop struct{}

// The shard-map page in a real headless Chromium: three nodes and their
// shards appear with their entity counts; a fourth node joins, the
// coordinator moves shards to it, and the page marks the hand-offs while
// they last, then shows the shards on the new node.
func TestShardMapPage(t *testing.T) {
	cluster := testkit.NewCluster(t, testkit.NewLocalBackend()) // skips under -race
	bin := chromium(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	entity := actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *testpb.Ping:
			ctx.Respond(&testpb.Pong{EntityId: m.EntityId, Seq: m.Seq})
		case holdStop:
			select {
			case <-release:
			case <-time.After(2 * time.Minute):
			}
			ctx.Stop(ctx.Self())
		}
	})
	extractor := actorsharding.NewHashCodeMessageExtractor(shards)
	opts := []actorsharding.Option{
		actorsharding.WithRetryInterval(200 * time.Millisecond),
		actorsharding.WithRebalanceInterval(500 * time.Millisecond),
		actorsharding.WithHandOffTimeout(2 * time.Minute),
		actorsharding.WithHandOffStopMessage(holdStop{}),
		actorsharding.WithShardStartTimeout(2 * time.Second),
		actorsharding.WithCoordinatorSingleton(singleton.WithHandOverRetryInterval(200 * time.Millisecond)),
	}
	var sharding []*actorsharding.Sharding
	var regions []*actor.PID
	start := func() *testkit.Node {
		n := cluster.StartNode()
		s, err := actorsharding.New(n.System, n.Membership)
		if err != nil {
			t.Fatal(err)
		}
		region, err := s.StartRegion(typeName, entity, extractor, opts...)
		if err != nil {
			t.Fatal(err)
		}
		sharding, regions = append(sharding, s), append(regions, region)
		return n
	}
	nodes := []*testkit.Node{start(), start(), start()}
	cluster.WaitConverged(t, 30*time.Second)

	// Entities in every shard: per shard, how many.
	var ids []string
	want := map[string]int{}
	for i := 0; len(want) < shards; i++ {
		id := fmt.Sprintf("e-%d", i)
		ids = append(ids, id)
		want[extractor.ShardID(id)]++
	}
	for _, id := range ids {
		askPing(t, nodes[0], regions[0], id)
	}

	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", management.NewHandler(sharding[1])))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 400))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	b := browser{ctx: ctx}
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(1280, 400), chromedp.Navigate(srv.URL+"/admin/")); err != nil {
		t.Fatalf("open the page: %v", err)
	}

	// Every node and every shard, where the coordinator has it, with its
	// entities.
	var last []pageNode
	testkit.WaitFor(t, 60*time.Second, func() bool {
		last = b.nodes(t)
		homes, _, entities := placement(last)
		coord, _, ok := coordinatorHomes(cluster)
		return ok && len(last) == 3 && maps.Equal(homes, coord) && maps.Equal(entities, want) &&
			sameMembers(last, nodes)
	}, "the page to show 3 nodes and %d shards as the coordinator places them: %v", shards, testkit.Lazy(func() any { return last }))

	// A fourth node: the coordinator hands shards off to make room, and
	// the page marks them until their entities stop.
	nodes = append(nodes, start())
	cluster.WaitConverged(t, 30*time.Second)
	var marked []string
	testkit.WaitFor(t, 60*time.Second, func() bool {
		last = b.nodes(t)
		_, marked, _ = placement(last)
		_, moving, ok := coordinatorHomes(cluster)
		return ok && len(last) == 4 && sameMembers(last, nodes) && len(marked) > 0 && slices.Equal(marked, moving)
	}, "the page to show 4 nodes and the hand-offs in progress: %v", testkit.Lazy(func() any { return last }))
	t.Logf("hand-offs shown: %v", marked)
	if *screenshot != "" {
		var png []byte
		if err := chromedp.Run(ctx, chromedp.CaptureScreenshot(&png)); err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", *screenshot, len(png))
	}

	// Released, the shards move; messages start them again, at their new
	// homes, until the new node holds its share.
	releaseOnce.Do(func() { close(release) })
	newest := nodes[3].MemberID()
	testkit.WaitFor(t, 90*time.Second, func() bool {
		for _, id := range ids {
			nodes[0].System.Root.Send(regions[0], &testpb.Ping{EntityId: id})
		}
		time.Sleep(500 * time.Millisecond)
		last = b.nodes(t)
		homes, marked, entities := placement(last)
		coord, moving, ok := coordinatorHomes(cluster)
		onNewest := 0
		for _, m := range homes {
			if m == newest {
				onNewest++
			}
		}
		return ok && len(moving) == 0 && len(marked) == 0 && len(coord) == shards && maps.Equal(homes, coord) &&
			maps.Equal(entities, want) && onNewest >= shards/4-1
	}, "the page to show the new node with its share of the shards: %v", testkit.Lazy(func() any { return last }))
}

// sameMembers: the page has one column per node, by member id and address.
func sameMembers(page []pageNode, nodes []*testkit.Node) bool {
	got := map[string]string{}
	for _, n := range page {
		got[n.Member] = n.Address
	}
	want := map[string]string{}
	for _, n := range nodes {
		want[n.MemberID()] = n.Address()
	}
	return maps.Equal(got, want)
}

func askPing(t *testing.T, n *testkit.Node, region *actor.PID, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := n.System.Root.RequestFuture(region, &testpb.Ping{EntityId: id}, 5*time.Second).Result()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ping %s: %v", id, err)
		}
	}
}
