// Package admin is linkgate gateway's admin API: APISIX 2.14's
// /apisix/admin/ endpoints with their envelopes and error messages (or
// 3.x's with Options.V3), over any gateway.Store.
package admin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/linkgate/linkgate/gateway"
)

// MaxBody is the largest request body the admin API reads (APISIX: 1.5 MiB).
const MaxBody = 1536 << 10

// Options configure the admin API.
type Options struct {
	// AdminKeys may do everything; ViewerKeys may only GET. With no admin
	// key configured every call is refused: the API is never open.
	AdminKeys, ViewerKeys []string
	// AllowAdmin lists the client networks allowed to call (403 otherwise).
	AllowAdmin []netip.Prefix
	// V3 answers with APISIX 3.x envelopes and X-API-VERSION: v3.
	V3 bool
	// Prefix is the key prefix shown in envelopes, "/apisix" by default.
	Prefix string
	// Now is the clock for create_time/update_time.
	Now func() time.Time
}

type api struct {
	log   *slog.Logger
	store gateway.Store
	reg   *gateway.Registry
	opts  Options
}

// NewHandler returns the admin API.
func NewHandler(logger *slog.Logger, store gateway.Store, reg *gateway.Registry, opts Options) http.Handler {
	if opts.Prefix == "" {
		opts.Prefix = "/apisix"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &api{log: logger, store: store, reg: reg, opts: opts}
	mux := http.NewServeMux()
	addRoutes(mux, a)
	return a.guard(mux)
}

// guard enforces allow_admin, the API key and its role, and the body limit.
func (a *api) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.opts.V3 {
			w.Header().Set("X-API-VERSION", "v3")
		}
		if !a.allowed(r) {
			writeJSON(w, http.StatusForbidden, map[string]any{"error_msg": "403 Forbidden"})
			return
		}
		key := r.URL.Query().Get("api_key")
		if key == "" {
			key = r.Header.Get("X-API-KEY")
		}
		if key == "" {
			if c, err := r.Cookie("x_api_key"); err == nil {
				key = c.Value
			}
		}
		role := a.role(key)
		if role == "" {
			body := map[string]any{"error_msg": "failed to check token"}
			if a.opts.V3 {
				body["description"] = "wrong apikey"
				if key == "" {
					body["description"] = "missing apikey"
				}
			}
			writeJSON(w, http.StatusUnauthorized, body)
			return
		}
		if role == "viewer" && r.Method != http.MethodGet {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error_msg": "invalid method for role viewer"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		next.ServeHTTP(w, r)
	})
}

func (a *api) allowed(r *http.Request) bool {
	if len(a.opts.AllowAdmin) == 0 {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range a.opts.AllowAdmin {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// role returns "admin", "viewer" or "" for key, comparing in constant time
// against every configured key.
func (a *api) role(key string) string {
	if key == "" {
		return ""
	}
	role := ""
	for _, k := range a.opts.AdminKeys {
		if k != "" && subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			role = "admin"
		}
	}
	for _, k := range a.opts.ViewerKeys {
		if k != "" && role == "" && subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			role = "viewer"
		}
	}
	return role
}

func (a *api) handleNotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error_msg": "not found"})
	})
}

func (a *api) handlePluginsList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.reg.Names())
	})
}

// kindOf reads {kind} from the path, answering 404 when it is unknown.
func kindOf(w http.ResponseWriter, r *http.Request) (gateway.Kind, bool) {
	kind, ok := gateway.ParseKind(r.PathValue("kind"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error_msg": "not found"})
	}
	return kind, ok
}

// handleCollection serves /apisix/admin/{kind}.
func (a *api) handleCollection() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, ok := kindOf(w, r)
		if !ok {
			return
		}
		switch r.Method {
		case http.MethodGet:
			a.list(w, r, kind)
		case http.MethodPut:
			a.put(w, r, kind, "")
		case http.MethodPost:
			a.post(w, r, kind)
		default:
			writeJSON(w, http.StatusNotFound, map[string]any{"error_msg": "not found"})
		}
	})
}

// handleItem serves /apisix/admin/{kind}/{id}[/{sub...}].
func (a *api) handleItem() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, ok := kindOf(w, r)
		if !ok {
			return
		}
		id, sub := r.PathValue("id"), r.PathValue("sub")
		if sub != "" && r.Method != http.MethodPatch {
			writeJSON(w, http.StatusNotFound, map[string]any{"error_msg": "not found"})
			return
		}
		switch r.Method {
		case http.MethodGet:
			a.get(w, r, kind, id)
		case http.MethodPut:
			a.put(w, r, kind, id)
		case http.MethodPost:
			writeErr(w, http.StatusBadRequest, fmt.Sprintf("wrong %s id, do not need it", kind.Singular()))
		case http.MethodDelete:
			a.delete(w, r, kind, id)
		case http.MethodPatch:
			a.patch(w, r, kind, id, sub)
		default:
			writeJSON(w, http.StatusNotFound, map[string]any{"error_msg": "not found"})
		}
	})
}

// node is an entry as APISIX's envelopes show it.
type node struct {
	Key           string          `json:"key"`
	Value         json.RawMessage `json:"value"`
	CreatedIndex  int64           `json:"createdIndex,omitempty"`
	ModifiedIndex int64           `json:"modifiedIndex,omitempty"`
}

func (a *api) key(kind gateway.Kind, id string) string {
	return a.opts.Prefix + "/" + string(kind) + "/" + id
}

func (a *api) node(e gateway.Entry, withIndex bool) node {
	n := node{Key: a.key(e.Kind, e.ID), Value: e.Value}
	if withIndex {
		n.CreatedIndex, n.ModifiedIndex = e.CreatedIndex, e.ModifiedIndex
	}
	return n
}

func (a *api) get(w http.ResponseWriter, r *http.Request, kind gateway.Kind, id string) {
	e, err := a.store.Get(r.Context(), kind, id)
	if err != nil {
		a.storeErr(w, r, err)
		return
	}
	if a.opts.V3 {
		writeJSON(w, http.StatusOK, a.node(e, true))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"action": "get", "count": 1, "node": a.node(e, true)})
}

func (a *api) list(w http.ResponseWriter, r *http.Request, kind gateway.Kind) {
	es, err := a.store.List(r.Context(), kind)
	if err != nil {
		a.storeErr(w, r, err)
		return
	}
	nodes := make([]node, 0, len(es))
	for _, e := range es {
		nodes = append(nodes, a.node(e, true))
	}
	if a.opts.V3 {
		a.listV3(w, r, nodes)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"action": "get", "count": len(nodes),
		"node": map[string]any{"key": a.opts.Prefix + "/" + string(kind), "dir": true, "nodes": nodes}})
}

// listV3 pages and filters as APISIX 3.x: page, page_size (10–500),
// name, label (key or key:value) and uri.
func (a *api) listV3(w http.ResponseWriter, r *http.Request, nodes []node) {
	q := r.URL.Query()
	name, label, uri := q.Get("name"), q.Get("label"), q.Get("uri")
	if name != "" || label != "" || uri != "" {
		kept := nodes[:0]
		for _, n := range nodes {
			var v struct {
				Name   string            `json:"name"`
				URI    string            `json:"uri"`
				URIs   []string          `json:"uris"`
				Labels map[string]string `json:"labels"`
			}
			_ = json.Unmarshal(n.Value, &v)
			if name != "" && !strings.Contains(v.Name, name) {
				continue
			}
			if uri != "" && !strings.Contains(v.URI, uri) && !slices.ContainsFunc(v.URIs, func(u string) bool { return strings.Contains(u, uri) }) {
				continue
			}
			if label != "" {
				k, val, hasVal := strings.Cut(label, ":")
				got, ok := v.Labels[k]
				if !ok || (hasVal && got != val) {
					continue
				}
			}
			kept = append(kept, n)
		}
		nodes = kept
	}
	total := len(nodes)
	if ps := q.Get("page_size"); ps != "" || q.Get("page") != "" {
		size, err1 := strconv.Atoi(cmpOr(ps, "10"))
		page, err2 := strconv.Atoi(cmpOr(q.Get("page"), "1"))
		if err1 != nil || err2 != nil || size < 10 || size > 500 || page < 1 {
			writeErr(w, http.StatusBadRequest, "page must be ≥ 1 and page_size between 10 and 500")
			return
		}
		from := min((page-1)*size, len(nodes))
		nodes = nodes[from:min(from+size, len(nodes))]
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": total, "list": nodes})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// readDoc reads and decodes the request body as a JSON object.
func readDoc(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: the limit is %d bytes", MaxBody))
			return nil, false
		}
		writeErr(w, http.StatusBadRequest, "failed to read request body: "+err.Error())
		return nil, false
	}
	v, err := gateway.DecodeJSON(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error_msg": "invalid request body: " + err.Error(), "req_body": string(body)})
		return nil, false
	}
	doc, ok := v.(map[string]any)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error_msg": "invalid request body: expected a JSON object", "req_body": string(body)})
		return nil, false
	}
	return doc, true
}

func (a *api) put(w http.ResponseWriter, r *http.Request, kind gateway.Kind, id string) {
	if r.URL.Query().Has("ttl") {
		writeErr(w, http.StatusBadRequest, "ttl is not supported by linkgate")
		return
	}
	doc, ok := readDoc(w, r)
	if !ok {
		return
	}
	id, ok = a.resolveID(w, kind, doc, id, true)
	if !ok {
		return
	}
	a.store1(w, r, kind, id, doc, "set", 0)
}

func (a *api) post(w http.ResponseWriter, r *http.Request, kind gateway.Kind) {
	if kind == gateway.KindConsumer {
		writeErr(w, http.StatusBadRequest, "not supported `POST` method for consumer")
		return
	}
	doc, ok := readDoc(w, r)
	if !ok {
		return
	}
	if _, has := doc["id"]; has {
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("wrong %s id, do not need it", kind.Singular()))
		return
	}
	id, err := a.store.NextID(r.Context())
	if err != nil {
		a.storeErr(w, r, err)
		return
	}
	doc["id"] = id
	a.store1(w, r, kind, id, doc, "create", 0)
}

// resolveID reconciles the id in the path with the one in the body, as
// APISIX's check_conf does, and writes it into doc.
func (a *api) resolveID(w http.ResponseWriter, kind gateway.Kind, doc map[string]any, pathID string, needID bool) (string, bool) {
	if kind == gateway.KindConsumer {
		name, _ := doc["username"].(string)
		if pathID != "" && name != "" && name != pathID {
			writeErr(w, http.StatusBadRequest, "wrong username")
			return "", false
		}
		if name == "" && pathID != "" {
			doc["username"] = pathID
			name = pathID
		}
		if name == "" {
			writeErr(w, http.StatusBadRequest, "invalid configuration: property \"username\" is required")
			return "", false
		}
		return name, true
	}
	bodyID, hasBodyID := doc["id"]
	bodyIDStr, _ := gateway.IDString(bodyID)
	switch {
	case pathID == "" && !hasBodyID:
		if needID {
			writeErr(w, http.StatusBadRequest, fmt.Sprintf("missing %s id", kind.Singular()))
			return "", false
		}
	case pathID != "" && hasBodyID && bodyIDStr != pathID:
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("wrong %s id", kind.Singular()))
		return "", false
	case pathID == "":
		pathID = bodyIDStr
	}
	if hasBodyID {
		// Validate the id as given (string or integer) before normalising it.
		if err := gateway.SchemaOf(kind).Properties["id"].Validate(bodyID); err != nil {
			writeErr(w, http.StatusBadRequest, fmt.Sprintf("invalid configuration: property \"id\" validation failed: %v", err))
			return "", false
		}
	}
	doc["id"] = pathID
	return pathID, true
}

// store1 validates doc, checks references, stamps times and writes it.
// prevRev > 0 makes the write conditional (PATCH).
func (a *api) store1(w http.ResponseWriter, r *http.Request, kind gateway.Kind, id string, doc map[string]any, action string, prevRev int64) {
	ctx := r.Context()
	now := a.opts.Now().Unix()
	var prev *gateway.Entry
	if e, err := a.store.Get(ctx, kind, id); err == nil {
		prev = &e
	} else if !errors.Is(err, gateway.ErrNotFound) {
		a.storeErr(w, r, err)
		return
	}
	if _, ok := doc["create_time"]; !ok {
		doc["create_time"] = json.Number(strconv.FormatInt(now, 10))
		if prev != nil {
			var old struct {
				CreateTime json.Number `json:"create_time"`
			}
			if json.Unmarshal(prev.Value, &old) == nil && old.CreateTime != "" {
				doc["create_time"] = old.CreateTime
			}
		}
	}
	doc["update_time"] = json.Number(strconv.FormatInt(now, 10))
	if err := gateway.Check(kind, doc, a.reg); err != nil {
		a.validationErr(w, err)
		return
	}
	if ok := a.checkRefs(w, r, kind, doc); !ok {
		return
	}
	value, err := json.Marshal(doc)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	e, created, err := a.store.Put(ctx, kind, id, value, prevRev)
	if err != nil {
		a.storeErr(w, r, err)
		return
	}
	status := http.StatusOK
	if created || action == "create" {
		status = http.StatusCreated
	}
	if action == "compareAndSwap" {
		status = http.StatusCreated // as APISIX 2.14's atomic_set
	}
	a.log.Info("admin write", "action", action, "key", a.key(kind, id), "revision", e.ModifiedIndex)
	if a.opts.V3 {
		writeJSON(w, status, a.node(e, true))
		return
	}
	writeJSON(w, status, map[string]any{"action": action, "node": a.node(e, false)})
}

func (a *api) validationErr(w http.ResponseWriter, err error) {
	var ve *gateway.ValidationError
	if errors.As(err, &ve) {
		writeErr(w, http.StatusBadRequest, ve.Msg)
		return
	}
	writeErr(w, http.StatusBadRequest, err.Error())
}

// checkRefs verifies that the upstream, service and plugin config a
// resource names exist.
func (a *api) checkRefs(w http.ResponseWriter, r *http.Request, kind gateway.Kind, doc map[string]any) bool {
	type ref struct {
		field string
		kind  gateway.Kind
		what  string
	}
	refs := []ref{{"upstream_id", gateway.KindUpstream, "upstream"}}
	if kind == gateway.KindRoute {
		refs = append(refs, ref{"service_id", gateway.KindService, "service"}, ref{"plugin_config_id", gateway.KindPluginConfig, "plugin config"})
	}
	if kind != gateway.KindRoute && kind != gateway.KindService {
		return true
	}
	for _, ref := range refs {
		v, ok := doc[ref.field]
		if !ok {
			continue
		}
		id, _ := gateway.IDString(v)
		if _, err := a.store.Get(r.Context(), ref.kind, id); err != nil {
			if errors.Is(err, gateway.ErrNotFound) {
				writeErr(w, http.StatusBadRequest, fmt.Sprintf("failed to fetch %s info by %s id [%s], response code: 404", ref.what, ref.what, id))
			} else {
				a.storeErr(w, r, err)
			}
			return false
		}
	}
	return true
}

func (a *api) delete(w http.ResponseWriter, r *http.Request, kind gateway.Kind, id string) {
	ctx := r.Context()
	if _, err := a.store.Get(ctx, kind, id); err != nil {
		a.storeErr(w, r, err)
		return
	}
	if msg, err := a.inUse(ctx, kind, id); err != nil {
		a.storeErr(w, r, err)
		return
	} else if msg != "" {
		writeErr(w, http.StatusBadRequest, msg)
		return
	}
	if err := a.store.Delete(ctx, kind, id); err != nil {
		a.storeErr(w, r, err)
		return
	}
	a.log.Info("admin write", "action", "delete", "key", a.key(kind, id))
	if a.opts.V3 {
		writeJSON(w, http.StatusOK, map[string]any{"deleted": "1", "key": a.key(kind, id)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"action": "delete", "deleted": "1", "key": a.key(kind, id), "node": map[string]any{}})
}

// inUse returns APISIX's refusal message when a route or service still
// refers to the resource.
func (a *api) inUse(ctx context.Context, kind gateway.Kind, id string) (string, error) {
	var field string
	var users []gateway.Kind
	var what string
	switch kind {
	case gateway.KindUpstream:
		field, users, what = "upstream_id", []gateway.Kind{gateway.KindRoute, gateway.KindService}, "can not delete this upstream"
	case gateway.KindService:
		field, users, what = "service_id", []gateway.Kind{gateway.KindRoute}, "can not delete this service directly"
	case gateway.KindPluginConfig:
		field, users, what = "plugin_config_id", []gateway.Kind{gateway.KindRoute}, "can not delete this plugin config"
	default:
		return "", nil
	}
	for _, uk := range users {
		es, err := a.store.List(ctx, uk)
		if err != nil {
			return "", err
		}
		for _, e := range es {
			var v map[string]any
			if json.Unmarshal(e.Value, &v) != nil {
				continue
			}
			if ref, ok := gateway.IDString(v[field]); ok && ref == id {
				return fmt.Sprintf("%s, %s [%s] is still using it now", what, uk.Singular(), e.ID), nil
			}
		}
	}
	return "", nil
}

// patch merges the body into the stored value (RFC 7386: objects merge,
// null deletes, anything else replaces) or, with a sub-path such as
// upstream/nodes, replaces the value at that path; then validates and
// writes conditionally on the revision read.
func (a *api) patch(w http.ResponseWriter, r *http.Request, kind gateway.Kind, id, sub string) {
	ctx := r.Context()
	e, err := a.store.Get(ctx, kind, id)
	if err != nil {
		a.storeErr(w, r, err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: the limit is %d bytes", MaxBody))
		return
	}
	patchV, err := gateway.DecodeJSON(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error_msg": "invalid request body: " + err.Error(), "req_body": string(body)})
		return
	}
	cur, err := gateway.DecodeJSON(e.Value)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "stored value is not JSON: "+err.Error())
		return
	}
	doc, _ := cur.(map[string]any)
	if doc == nil {
		doc = map[string]any{}
	}
	if sub == "" {
		p, ok := patchV.(map[string]any)
		if !ok {
			writeErr(w, http.StatusBadRequest, "invalid request body: expected a JSON object")
			return
		}
		merged, _ := mergePatch(doc, p).(map[string]any)
		doc = merged
	} else {
		if err := setPath(doc, strings.Split(strings.Trim(sub, "/"), "/"), patchV); err != nil {
			writeErr(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if kind != gateway.KindConsumer {
		doc["id"] = id
	} else {
		doc["username"] = id
	}
	a.store1(w, r, kind, id, doc, "compareAndSwap", e.ModifiedIndex)
}

func mergePatch(target any, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

func setPath(doc map[string]any, path []string, v any) error {
	cur := doc
	for i, p := range path {
		if p == "" {
			return fmt.Errorf("invalid sub path")
		}
		if i == len(path)-1 {
			if v == nil {
				delete(cur, p)
			} else {
				cur[p] = v
			}
			return nil
		}
		next, ok := cur[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	return nil
}

func (a *api) storeErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, gateway.ErrNotFound):
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Key not found"})
	case errors.Is(err, gateway.ErrConflict):
		writeErr(w, http.StatusServiceUnavailable, gateway.ErrConflict.Error())
	default:
		a.log.Error("config store", "method", r.Method, "path", r.URL.Path, "err", err)
		writeErr(w, http.StatusServiceUnavailable, err.Error())
	}
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error_msg": msg})
}

// writeJSON writes v with a trailing newline, as APISIX's core.response does.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error_msg":"failed to encode response"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
