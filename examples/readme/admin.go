package readme

import (
	"net/http"
	"time"

	"github.com/protoshard/protoshard/actorsharding"
	"github.com/protoshard/protoshard/management"
)

// adminMux mounts the admin routes of docs/operations.md.
func adminMux(sharding *actorsharding.Sharding) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", management.NewHandler(sharding,
		management.WithTimeout(3*time.Second), management.WithSingleton("scheduler", ""))))
	return mux
}

// probes mounts the readiness and liveness checks where Kubernetes' probes
// look.
func probes(mux *http.ServeMux, sharding *actorsharding.Sharding) {
	mux.Handle("/ready", management.ReadinessHandler(sharding, management.WithReadinessTypes("Counter")))
	mux.Handle("/alive", management.LivenessHandler(sharding))
}
