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

// Mount the admin handler on the application's own mux, under /admin/;
// the shard-map page is then at /admin/ and the JSON routes below it.
func ExampleNewHandler() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A node of its own in-process cluster.
	sharding, err := actorsharding.Join(ctx, system, actorsharding.WithMembership(local.NewRegistry().Provider()))
	if err != nil {
		fmt.Println("join:", err)
		return
	}
	defer sharding.Leave(ctx)
	if _, err := sharding.StartRegion("Counter", actor.PropsFromFunc(func(actor.Context) {}),
		actorsharding.NewHashCodeMessageExtractor(100)); err != nil {
		fmt.Println("start region:", err)
		return
	}

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
