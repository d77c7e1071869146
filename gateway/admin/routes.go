package admin

import "net/http"

// addRoutes lists the whole admin API (APISIX 2.14 paths).
func addRoutes(mux *http.ServeMux, a *api) {
	mux.Handle("GET /apisix/admin/plugins/list", a.handlePluginsList())
	mux.Handle("/apisix/admin/{kind}", a.handleCollection())         // GET list, POST, PUT (id in body)
	mux.Handle("/apisix/admin/{kind}/{id}", a.handleItem())          // GET, PUT, POST (refused), DELETE, PATCH
	mux.Handle("/apisix/admin/{kind}/{id}/{sub...}", a.handleItem()) // PATCH of a sub-path
	mux.Handle("/apisix/admin/", a.handleNotFound())
}
