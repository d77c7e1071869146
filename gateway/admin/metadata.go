package admin

import (
	"net/http"

	"github.com/linkgate/linkgate/gateway"
)

// pluginMetadata serves /apisix/admin/plugin_metadata[/{plugin}]
// (apisix/admin/plugin_metadata.lua): GET (one, or the list), PUT and
// DELETE. The metadata is checked by the plugin's metadata schema
// (gateway.Registry.CheckMetadata) and stored under the plugin's name,
// without timestamps. Under v3 the checks run in 3.x's order
// (configuration, times, name, schema), the value keeps the name as its id
// and POST and PATCH answer 405; under v2 in 2.14's (name, configuration,
// schema), the value as sent, POST 405 and PATCH 404.
func (a *api) pluginMetadata(w http.ResponseWriter, r *http.Request, name string) {
	kind := gateway.KindPluginMetadata
	switch r.Method {
	case http.MethodGet:
		if name == "" {
			a.list(w, r, kind)
		} else {
			a.get(w, r, kind, name)
		}
		return
	case http.MethodPut, http.MethodDelete:
	case http.MethodPost:
		what := "metadata"
		if a.opts.V3 {
			what = "plugin_metadata"
		}
		writeErr(w, http.StatusMethodNotAllowed, "not supported `POST` method for "+what)
		return
	default:
		if a.opts.V3 {
			writeErr(w, http.StatusMethodNotAllowed, "not supported `"+r.Method+"` method for plugin_metadata")
		} else {
			writeErr(w, http.StatusNotFound, "not found")
		}
		return
	}
	if a.opts.ReadOnly != "" {
		writeErr(w, http.StatusMethodNotAllowed, a.opts.ReadOnly)
		return
	}
	if r.Method == http.MethodDelete {
		if name == "" {
			msg := "missing metadata key"
			if a.opts.V3 {
				msg = "missing plugin_metadata id"
			}
			writeErr(w, http.StatusBadRequest, msg)
			return
		}
		if err := a.store.Delete(r.Context(), kind, name); err != nil {
			a.storeErr(w, r, err)
			return
		}
		a.deleted(w, kind, name)
		return
	}
	req := &request{}
	if !a.readBody(w, r, req) {
		return
	}
	doc, isObject := req.conf.(map[string]any)
	_, known := a.reg.Get(name)
	msg := ""
	switch {
	case a.opts.V3 && !isObject:
		msg = "missing configurations"
	case a.opts.V3 && forbiddenTimes(doc) != "":
		msg = forbiddenTimes(doc)
	case name == "":
		msg = "missing plugin name"
	case !known:
		msg = "invalid plugin name"
	case !isObject:
		msg = "missing configurations"
	}
	if msg != "" {
		writeErr(w, http.StatusBadRequest, msg)
		return
	}
	if err := a.reg.CheckMetadata(name, deepCopy(doc).(map[string]any)); err != nil {
		a.validationErr(w, err)
		return
	}
	if a.opts.V3 {
		doc["id"] = name
	}
	a.write(w, r, kind, name, doc, "set", 0)
}
