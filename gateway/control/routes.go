package control

import (
	"net/http"

	"github.com/linkgate/linkgate/gateway"
)

// addRoutes lists the whole control API.
func addRoutes(mux *http.ServeMux, a *api) {
	mux.Handle("GET /v1/routes", a.handleList(gateway.KindRoute))
	mux.Handle("GET /v1/route/{id}", a.handleOne(gateway.KindRoute))
	mux.Handle("GET /v1/services", a.handleList(gateway.KindService))
	mux.Handle("GET /v1/service/{id}", a.handleOne(gateway.KindService))
	mux.Handle("GET /v1/upstreams", a.handleList(gateway.KindUpstream))
	mux.Handle("GET /v1/upstream/{id}", a.handleOne(gateway.KindUpstream))
	mux.Handle("GET /v1/config", a.handleConfig()) // linkgate: the live router's view, sync state, skipped resources
	mux.Handle("/", a.handleNotFound())
}
