package management_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/management"
	"github.com/protoshard/protoshard/membership/local"
)

// counterNode starts a node of its own in-process cluster, with a region
// of the entity type "Counter"; stop leaves the cluster and stops the
// node's actor system.
func counterNode() (sharding *actorsharding.Sharding, stop func(), err error) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sharding, err = actorsharding.Join(ctx, system, actorsharding.WithMembership(local.NewRegistry().Provider()))
	if err != nil {
		system.Shutdown()
		return nil, nil, fmt.Errorf("join: %w", err)
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sharding.Leave(ctx)
		system.Shutdown()
	}
	if _, err := sharding.StartRegion("Counter", actor.PropsFromFunc(func(actor.Context) {}),
		actorsharding.NewHashCodeMessageExtractor(100)); err != nil {
		stop()
		return nil, nil, fmt.Errorf("start region: %w", err)
	}
	return sharding, stop, nil
}

// Mount the admin handler on the application's own mux, under /admin/;
// the shard-map page is then at /admin/ and the JSON routes below it.
func ExampleNewHandler() {
	sharding, stop, err := counterNode()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", management.NewHandler(sharding, management.WithTimeout(2*time.Second))))
	srv := httptest.NewServer(mux) // the application's http.Server in production
	defer srv.Close()

	res, err := http.Get(srv.URL + "/admin/cluster/members")
	if err != nil {
		fmt.Println("get:", err)
		return
	}
	defer res.Body.Close()
	var members struct {
		Members []struct{ Status string }
	}
	if err := json.NewDecoder(res.Body).Decode(&members); err != nil {
		fmt.Println("decode:", err)
		return
	}
	fmt.Println(res.Status, len(members.Members), "member", members.Members[0].Status)
	// Output: 200 OK 1 member Up
}

// Serve the health checks where the Kubernetes probes look, here on the
// application's mux; NewHandler serves the same at /ready and /alive
// under its prefix. Give each probe a timeoutSeconds above the checks'
// time-out:
//
//	readinessProbe:
//	  httpGet: {path: /ready, port: 8558}
//	  timeoutSeconds: 3
//	livenessProbe:
//	  httpGet: {path: /alive, port: 8558}
//	  timeoutSeconds: 3
//	  failureThreshold: 5
func ExampleReadinessHandler() {
	sharding, stop, err := counterNode()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	mux := http.NewServeMux()
	// Ready once the Counter region has registered with its coordinator.
	mux.Handle("/ready", management.ReadinessHandler(sharding, management.WithReadinessTypes("Counter"),
		management.WithTimeout(2*time.Second)))
	mux.Handle("/alive", management.LivenessHandler(sharding, management.WithTimeout(2*time.Second)))
	srv := httptest.NewServer(mux) // the application's http.Server in production
	defer srv.Close()

	probe := func(path string) (int, string) {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		var body struct{ Status string }
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			return res.StatusCode, err.Error()
		}
		return res.StatusCode, body.Status
	}
	// The region registers in the background: "starting" (503) until then,
	// as a probe sees it.
	code, status := probe("/ready")
	for deadline := time.Now().Add(10 * time.Second); code != http.StatusOK && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		code, status = probe("/ready")
	}
	fmt.Println("/ready:", code, status)
	code, status = probe("/alive")
	fmt.Println("/alive:", code, status)
	// Output:
	// /ready: 200 ready
	// /alive: 200 alive
}
