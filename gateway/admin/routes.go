package admin

import "net/http"

// addRoutes lists the whole admin API (APISIX 2.14's uri_route).
func addRoutes(mux *http.ServeMux, a *api) {
	mux.Handle("GET /apisix/admin/plugins/list", a.handlePluginsList())
	mux.Handle("PUT /apisix/admin/plugins/reload", a.handlePluginsReload())
	// routes, services, upstreams, consumers, global_rules, plugin_configs:
	// GET (list or one), PUT, POST, DELETE, PATCH (with a sub-path);
	// schema/{name}, schema/plugins/{name}, plugins/{name}.
	mux.Handle("/apisix/admin/", a.handleAdmin())
	mux.Handle("/apisix/admin", a.handleAdmin())
}
