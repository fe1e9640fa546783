// Command metrics runs one node of cluster sharding with protoshard's
// OpenTelemetry metrics exported for Prometheus: it hands proto.actor an
// OpenTelemetry MeterProvider (actor.WithMetricProviders), sends some
// messages to counter entities and one message that is dropped, and prints
// the protoshard_* series of a scrape; with -serve it keeps serving them.
//
//	go run ./examples/metrics
//	go run ./examples/metrics -serve :9464   # then curl localhost:9464/metrics
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/examples/sharding/counterpb"
	"github.com/protoshard/protoshard/membership"
	"github.com/protoshard/protoshard/membership/local"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

const typeName = "Counter"

type counter struct{ count int64 }

func (c *counter) Receive(ctx actor.Context) {
	if msg, ok := ctx.Message().(*counterpb.Increment); ok {
		c.count++
		ctx.Respond(&counterpb.Counted{EntityId: msg.EntityId, Count: c.count})
	}
}

func main() {
	serve := flag.String("serve", "", "keep serving /metrics on this address (e.g. :9464) after the traffic")
	entities := flag.Int("entities", 20, "number of counter entities")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer n.stop()
	if err := n.traffic(*entities); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := printSeries(os.Stdout, n.handler); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *serve != "" {
		fmt.Printf("serving http://%s/metrics\n", *serve)
		mux := http.NewServeMux()
		mux.Handle("/metrics", n.handler)
		fmt.Fprintln(os.Stderr, http.ListenAndServe(*serve, mux))
	}
}

// node is one actor system with its region and its metrics endpoint.
type node struct {
	system   *actor.ActorSystem
	remote   *remote.Remote
	cluster  *membership.Cluster
	provider *sdkmetric.MeterProvider
	region   *actor.PID
	handler  http.Handler
}

// start starts a node whose actor system reports to a Prometheus exporter
// with its own registry, served by the node's handler.
func start(ctx context.Context) (*node, error) {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	system := actor.NewActorSystem(
		actor.WithMetricProviders(provider),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			if os.Getenv("PROTOSHARD_LOG") == "" {
				return slog.New(slog.DiscardHandler)
			}
			return slog.New(slog.NewTextHandler(os.Stderr, nil))
		}))
	quarantine := membership.NewQuarantine()
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, quarantine.RemoteOption()))
	r.Start()
	cluster := membership.NewCluster(system, local.NewRegistry().Provider(), membership.Config{Quarantine: quarantine})
	n := &node{system: system, remote: r, cluster: cluster, provider: provider,
		handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{})}
	if err := cluster.Join(ctx); err != nil {
		n.stop()
		return nil, fmt.Errorf("join: %w", err)
	}
	sharding, err := actorsharding.New(system, cluster)
	if err != nil {
		n.stop()
		return nil, err
	}
	n.region, err = sharding.StartRegion(typeName, actor.PropsFromProducer(func() actor.Actor { return &counter{} }),
		actorsharding.NewHashCodeMessageExtractor(10))
	if err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

func (n *node) stop() {
	n.cluster.Close()
	n.remote.Shutdown(false)
	n.system.Shutdown()
	_ = n.provider.Shutdown(context.Background())
}

// traffic asks each of entities counters twice, then sends the region a
// nil message, which it drops (reason class nil_message).
func (n *node) traffic(entities int) error {
	for round := 0; round < 2; round++ {
		for i := range entities {
			id := fmt.Sprintf("counter-%d", i)
			if _, err := n.system.Root.RequestFuture(n.region, &counterpb.Increment{EntityId: id}, 10*time.Second).Result(); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
	}
	n.system.Root.Send(n.region, nil)
	return nil
}

// printSeries writes the protoshard_* lines of a scrape of h to out.
func printSeries(out io.Writer, h http.Handler) error {
	body, err := scrape(h)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "protoshard_") || strings.HasPrefix(line, "# HELP protoshard_") {
			fmt.Fprintln(out, line)
		}
	}
	return sc.Err()
}

// scrape is one GET /metrics of h, in process.
func scrape(h http.Handler) ([]byte, error) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("scrape: HTTP %d: %s", rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes(), nil
}
