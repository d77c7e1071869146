// Package control is linkgate gateway's control API (APISIX's, on its own
// listener, `--control-listen`): what a node is serving right now, read
// from its live configuration rather than from the store.
//
//   - GET /v1/routes, /v1/route/{id}, /v1/services, /v1/service/{id},
//     /v1/upstreams, /v1/upstream/{id}: the loaded resources as APISIX
//     shows them ({key, value, createdIndex, modifiedIndex}); a route is
//     listed only while it is served.
//   - GET /v1/config (linkgate's own): {revision, in_sync, view, skipped}
//     — the served routes with the stored resources each was compiled
//     from (gateway.View), whether every change in the store has been
//     received, and the resources left out with their reason.
package control

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/linkgate/linkgate/gateway"
)

type api struct {
	reloader *gateway.Reloader
	store    gateway.Store
	prefix   string
}

// NewHandler returns the control API of the node whose configuration
// reloader loads from store; prefix is the key prefix shown ("/apisix").
func NewHandler(reloader *gateway.Reloader, store gateway.Store, prefix string) http.Handler {
	if prefix == "" {
		prefix = "/apisix"
	}
	mux := http.NewServeMux()
	addRoutes(mux, &api{reloader: reloader, store: store, prefix: prefix})
	return mux
}

// item is an entry as APISIX's control API shows it.
type item struct {
	Key           string          `json:"key"`
	Value         json.RawMessage `json:"value"`
	CreatedIndex  int64           `json:"createdIndex"`
	ModifiedIndex int64           `json:"modifiedIndex"`
}

// items lists the loaded entries of k, by id.
func (a *api) items(k gateway.Kind) []item {
	served := map[string]bool{}
	if k == gateway.KindRoute {
		if c := a.reloader.Compiled(); c != nil {
			for _, r := range c.Routes {
				served[r.ID] = true
			}
		}
	}
	skipped := map[string]bool{}
	for _, se := range a.reloader.SkippedResources() {
		skipped[se.Key] = true
	}
	var out []item
	for _, e := range a.reloader.Entries(k) {
		if skipped[string(e.Kind)+"/"+e.ID] || (k == gateway.KindRoute && !served[e.ID]) {
			continue
		}
		out = append(out, item{Key: a.prefix + e.Key(), Value: e.Value, CreatedIndex: e.CreatedIndex, ModifiedIndex: e.ModifiedIndex})
	}
	return out
}

func (a *api) handleList(k gateway.Kind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, orEmpty(a.items(k)))
	})
}

func (a *api) handleOne(k gateway.Kind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		items := a.items(k)
		i := slices.IndexFunc(items, func(it item) bool { return strings.HasSuffix(it.Key, "/"+id) })
		if i < 0 {
			writeJSON(w, http.StatusNotFound, map[string]string{"error_msg": k.Singular() + "[" + id + "] not found"})
			return
		}
		writeJSON(w, http.StatusOK, items[i])
	})
}

type skipped struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

func (a *api) handleConfig() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inSync, err := a.reloader.InSync(r.Context(), a.store)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error_msg": err.Error()})
			return
		}
		var view gateway.View
		if c := a.reloader.Compiled(); c != nil {
			view = c.Describe()
		}
		sk := []skipped{}
		for _, se := range a.reloader.SkippedResources() {
			sk = append(sk, skipped{se.Key, se.Reason, se.Err.Error()})
		}
		writeJSON(w, http.StatusOK, map[string]any{"revision": view.Revision, "in_sync": inSync, "view": view, "skipped": sk})
	})
}

func (a *api) handleNotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error_msg": "404 Not Found"})
	})
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
