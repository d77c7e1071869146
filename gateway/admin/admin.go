// Package admin is linkgate gateway's admin API: APISIX 2.14's
// /apisix/admin/ endpoints with their envelopes and error messages (or
// 3.x's with Options.V3), over any gateway.Store.
//
// The request flow is apisix/admin/init.lua's: the API key, then the
// resource and method (404 "not found" otherwise), the body (JSON, at most
// MaxBody), then the resource's own checks in the order of its check_conf
// (gateway.Check), so the first error a request meets is the one APISIX
// reports, with its wording.
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
	"maps"
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
	// ReadOnly refuses every write with 405 and Reason (a declarative
	// configuration: the file is the source of truth).
	ReadOnly string
	// Now is the clock for create_time/update_time.
	Now func() time.Time
	// Standalone: the store's whole configuration is replaced by PUT
	// /apisix/admin/configs (APISIX 3.x's API-driven standalone mode).
	Standalone Standalone
	// Stream: the stream proxy runs (APISIX's proxy_mode with stream);
	// without it /apisix/admin/stream_routes answers 400, as APISIX's.
	Stream bool
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

// guard enforces allow_admin and the API key and its role.
func (a *api) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.allowed(r) {
			writeJSON(w, http.StatusForbidden, map[string]any{"error_msg": "403 Forbidden"})
			return
		}
		key := r.URL.Query().Get("api_key")
		if key == "" {
			key = r.Header.Get("X-API-KEY")
		}
		if key == "" {
			key = r.Header.Get("X_API_KEY") // nginx's $http_x_api_key, as APISIX reads it, matches both
		}
		if key == "" {
			if c, err := r.Cookie("x_api_key"); err == nil {
				key = c.Value
			}
		}
		role := a.role(key)
		if role == "" || (role == "viewer" && r.Method != http.MethodGet) {
			body := map[string]any{"error_msg": "failed to check token"}
			if a.opts.V3 {
				switch {
				case key == "":
					body["description"] = "missing apikey"
				case role == "":
					body["description"] = "wrong apikey"
				default:
					body["description"] = "invalid method for role viewer"
				}
			}
			writeJSON(w, http.StatusUnauthorized, body)
			return
		}
		if a.opts.V3 {
			w.Header().Set("X-API-VERSION", "v3") // 3.x: once the key is checked
		}
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

func (a *api) handlePluginsList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.reg.Names())
	})
}

// handlePluginsReload answers PUT /apisix/admin/plugins/reload as APISIX
// does. linkgate's plugins are compiled in and their configuration lives
// in the store, which every node watches: there is nothing to reload.
func (a *api) handlePluginsReload() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "done")
	})
}

// resource describes an admin resource: which methods it has and the
// words of its id messages (apisix/admin/<name>.lua).
type resource struct {
	kind                       gateway.Kind
	post, patch, put, del      bool
	missingID, wrongID, noNeed string
}

func idWords(word string) (string, string, string) {
	return "missing " + word + " id", "wrong " + word + " id", "wrong " + word + " id, do not need it"
}

var resources = func() map[string]resource {
	m := map[string]resource{}
	for name, spec := range map[string]struct {
		kind        gateway.Kind
		word        string
		post, patch bool
	}{
		"routes":    {gateway.KindRoute, "route", true, true},
		"services":  {gateway.KindService, "service", true, true},
		"upstreams": {gateway.KindUpstream, "upstream", true, true},
		// APISIX's global_rules.lua says "route id" too.
		"global_rules":  {gateway.KindGlobalRule, "route", false, true},
		"consumers":     {gateway.KindConsumer, "consumer", true, false},
		"stream_routes": {gateway.KindStreamRoute, "stream route", true, false},
		"ssl":           {gateway.KindSSL, "ssl", true, true},
	} {
		r := resource{kind: spec.kind, post: spec.post, patch: spec.patch, put: true, del: true}
		r.missingID, r.wrongID, r.noNeed = idWords(spec.word)
		m[name] = r
	}
	r := resource{kind: gateway.KindConsumerGroup, patch: true, put: true, del: true} // 3.x: no POST
	r.missingID, r.wrongID, r.noNeed = idWords("consumer group")
	m["consumer_groups"] = r
	m["plugin_configs"] = resource{kind: gateway.KindPluginConfig, patch: true, put: true, del: true,
		missingID: "missing id", wrongID: "wrong id", noNeed: "wrong id, do not need it"}
	return m
}()

// request is one admin call, parsed as apisix/admin/init.lua does.
type request struct {
	res     resource
	id, sub string // segments 5 and 6.. of /apisix/admin/RES/ID/SUB
	conf    any    // the decoded body; nil without one
	hasBody bool
	body    []byte
}

// handleAdmin serves /apisix/admin/{res}[/{id}[/{sub...}]].
func (a *api) handleAdmin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		segs := strings.Split(strings.TrimPrefix(r.URL.Path, "/apisix/admin/"), "/")
		res, id := segs[0], ""
		if len(segs) > 1 {
			id = segs[1]
		}
		sub := ""
		if len(segs) > 2 {
			sub = strings.Join(segs[2:], "/")
		}
		switch r.Method {
		case http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodPatch:
		case http.MethodHead:
			if res == "configs" && id == "" && a.opts.Standalone != nil {
				a.configs(w, r, id)
				return
			}
			if a.opts.V3 && res == "" {
				w.WriteHeader(http.StatusOK) // 3.x's HEAD /apisix/admin: is the API up
				return
			}
			fallthrough
		default:
			writeErr(w, http.StatusNotFound, "not found")
			return
		}
		if res == "ssls" && a.opts.V3 {
			res = "ssl" // 3.0's name
		}
		if res == "configs" && a.opts.Standalone != nil {
			a.configs(w, r, id)
			return
		}
		if res == "configs" && id == "validate" && r.Method == http.MethodPost {
			a.validateConfigs(w, r)
			return
		}
		if res == "schema" {
			a.schema(w, r, segs[1:])
			return
		}
		if res == "plugins" {
			a.plugins(w, r, id)
			return
		}
		if res == "plugin_metadata" {
			a.pluginMetadata(w, r, id)
			return
		}
		if res == "stream_routes" && !a.opts.Stream {
			writeErr(w, http.StatusBadRequest, "stream mode is disabled, can not add stream routes")
			return
		}
		if res == "stream_routes" && r.Method == http.MethodPatch && a.opts.V3 {
			writeErr(w, http.StatusMethodNotAllowed, "not supported `PATCH` method for stream route")
			return
		}
		if credID, ok := credentialPath(sub); ok && res == "consumers" {
			a.credentials(w, r, id, credID)
			return
		}
		spec, ok := resources[res]
		if !ok || !spec.allows(r.Method) {
			writeErr(w, http.StatusNotFound, "not found")
			return
		}
		if a.opts.ReadOnly != "" && r.Method != http.MethodGet {
			writeErr(w, http.StatusMethodNotAllowed, a.opts.ReadOnly)
			return
		}
		req := &request{res: spec, id: id, sub: sub}
		if !a.readBody(w, r, req) {
			return
		}
		if ttl := r.URL.Query().Get("ttl"); r.URL.Query().Has("ttl") {
			if _, err := strconv.ParseFloat(ttl, 64); err != nil {
				writeErr(w, http.StatusBadRequest, "invalid argument ttl: should be a number")
				return
			}
			if r.Method == http.MethodPut || r.Method == http.MethodPost {
				writeErr(w, http.StatusBadRequest, "ttl is not supported by linkgate")
				return
			}
		}
		switch r.Method {
		case http.MethodGet:
			if id == "" {
				a.list(w, r, spec.kind)
			} else {
				a.get(w, r, spec.kind, id)
			}
		case http.MethodPut:
			a.put(w, r, req)
		case http.MethodPost:
			a.post(w, r, req)
		case http.MethodDelete:
			a.delete(w, r, req)
		case http.MethodPatch:
			a.patch(w, r, req)
		}
	})
}

func (r resource) allows(method string) bool {
	switch method {
	case http.MethodGet:
		return true
	case http.MethodPut:
		return r.put
	case http.MethodPost:
		return r.post
	case http.MethodDelete:
		return r.del
	case http.MethodPatch:
		return r.patch
	}
	return false
}

// readBody reads and decodes the body, if any: 413 over MaxBody, 400 for
// invalid JSON (with the body, as APISIX answers).
func (a *api) readBody(w http.ResponseWriter, r *http.Request, req *request) bool {
	body, ok := readLimited(w, r, MaxBody)
	if !ok {
		return false
	}
	if len(body) == 0 {
		return true
	}
	v, err := gateway.DecodeJSON(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error_msg": "invalid request body: " + err.Error(), "req_body": string(body)})
		return false
	}
	req.conf, req.hasBody, req.body = v, true, body
	return true
}

// node is an entry as APISIX's envelopes show it.
type node struct {
	Key           string          `json:"key"`
	Value         json.RawMessage `json:"value"`
	CreatedIndex  int64           `json:"createdIndex,omitempty"`
	ModifiedIndex int64           `json:"modifiedIndex,omitempty"`
}

func (a *api) key(kind gateway.Kind, id string) string {
	if kind == gateway.KindSSL && a.opts.V3 {
		return a.opts.Prefix + "/ssls/" + id
	}
	return a.opts.Prefix + "/" + string(kind) + "/" + id
}

// node shows e; APISIX 2.14 strips the indexes from every envelope's
// node except the entries of a list (strip_etcd_resp).
// An ssl resource is shown without its private keys.
func (a *api) node(e gateway.Entry, withIndex bool) node {
	n := node{Key: a.key(e.Kind, e.ID), Value: e.Value}
	if e.Kind == gateway.KindSSL {
		n.Value = gateway.WithoutSSLKeys(e.Value)
	}
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
	writeJSON(w, http.StatusOK, map[string]any{"action": "get", "count": 1, "node": a.node(e, false)})
}

func (a *api) list(w http.ResponseWriter, r *http.Request, kind gateway.Kind) {
	es, err := a.store.List(r.Context(), kind)
	if err != nil {
		a.storeErr(w, r, err)
		return
	}
	nodes := make([]node, 0, len(es))
	for _, e := range es {
		if _, _, cred := gateway.ParseCredentialKey(e.ID); cred && kind == gateway.KindConsumer {
			continue // APISIX 3.x's filter_consumers_list
		}
		nodes = append(nodes, a.node(e, true))
	}
	a.writeList(w, r, a.opts.Prefix+"/"+string(kind), nodes)
}

// writeList answers a directory's entries: 3.x's paged list, or 2.14's dir node.
func (a *api) writeList(w http.ResponseWriter, r *http.Request, dir string, nodes []node) {
	if a.opts.V3 {
		a.listV3(w, r, nodes)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"action": "get", "count": len(nodes),
		"node": map[string]any{"key": dir, "dir": true, "nodes": nodes}})
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

// resolveID is check_conf's id handling: the path's id or the body's,
// which must agree; the id stored in the value is the path's (a string)
// or, without one, the body's as given (an integer stays an integer).
func resolveID(spec resource, doc map[string]any, pathID string, needID bool) (string, error) {
	bodyID, hasBodyID := doc["id"]
	id, idAny := pathID, any(pathID)
	if pathID == "" && hasBodyID {
		id, _ = gateway.IDString(bodyID)
		idAny = bodyID
	}
	hasID := pathID != "" || hasBodyID
	switch {
	case needID && !hasID:
		return "", errors.New(spec.missingID)
	case !needID && hasID:
		return "", errors.New(spec.noNeed)
	case needID && hasBodyID:
		if s, _ := gateway.IDString(bodyID); s != id {
			return "", errors.New(spec.wrongID)
		}
	}
	if hasID {
		doc["id"] = idAny
	}
	return id, nil
}

func (a *api) put(w http.ResponseWriter, r *http.Request, req *request) {
	doc, ok := req.conf.(map[string]any)
	if !ok {
		writeErr(w, http.StatusBadRequest, "missing configurations")
		return
	}
	var id string
	if req.res.kind == gateway.KindConsumer {
		if a.timesForbidden(w, doc) {
			return
		}
		if err := a.check(r.Context(), gateway.KindConsumer, doc); err != nil {
			a.validationErr(w, err)
			return
		}
		if !a.opts.V3 {
			if err := gateway.RequireAuthPlugin(doc, a.reg); err != nil {
				a.validationErr(w, err)
				return
			}
		}
		name, _ := doc["username"].(string)
		if req.id != "" && req.id != name {
			writeErr(w, http.StatusBadRequest, "wrong username")
			return
		}
		if a.opts.V3 {
			if msg, err := a.duplicateKey(r.Context(), doc, name, ""); err != nil {
				a.storeErr(w, r, err)
				return
			} else if msg != "" {
				writeErr(w, http.StatusBadRequest, msg)
				return
			}
		}
		id = name
	} else {
		var err error
		if id, err = resolveID(req.res, doc, req.id, true); err != nil {
			writeErr(w, http.StatusBadRequest, err.Error())
			return
		}
		if a.timesForbidden(w, doc) {
			return
		}
		if err := a.check(r.Context(), req.res.kind, doc); err != nil {
			a.validationErr(w, err)
			return
		}
	}
	a.set(w, r, req.res.kind, id, doc)
}

// set is a PUT's write: doc stamped with its times (create_time kept from
// the value it replaces), stored unconditionally.
func (a *api) set(w http.ResponseWriter, r *http.Request, kind gateway.Kind, id string, doc map[string]any) {
	prev, err := a.store.Get(r.Context(), kind, id)
	if err != nil && !errors.Is(err, gateway.ErrNotFound) {
		a.storeErr(w, r, err)
		return
	}
	var prevPtr *gateway.Entry
	if err == nil {
		prevPtr = &prev
	}
	a.stampTimes(doc, prevPtr, false, nil)
	a.write(w, r, kind, id, doc, "set", 0)
}

func (a *api) post(w http.ResponseWriter, r *http.Request, req *request) {
	if req.res.kind == gateway.KindConsumer {
		writeErr(w, http.StatusMethodNotAllowed, "not supported `POST` method for consumer")
		return
	}
	doc, ok := req.conf.(map[string]any)
	if !ok {
		writeErr(w, http.StatusBadRequest, "missing configurations")
		return
	}
	if _, err := resolveID(req.res, doc, req.id, false); err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	if a.timesForbidden(w, doc) {
		return
	}
	if err := a.check(r.Context(), req.res.kind, doc); err != nil {
		a.validationErr(w, err)
		return
	}
	a.stampTimes(doc, nil, false, nil)
	id, err := a.store.NextID(r.Context())
	if err != nil {
		a.storeErr(w, r, err)
		return
	}
	doc["id"] = id
	a.write(w, r, req.res.kind, id, doc, "create", 0)
}

// check runs gateway.Check with references looked up in the store. Under
// v3 it checks a copy, so the defaults the schema fills in are not stored
// (APISIX 3.x's check_conf validates conf_for_check, a deep copy); the
// gateway fills them in when it loads the value.
func (a *api) check(ctx context.Context, kind gateway.Kind, doc map[string]any) error {
	return a.checkRefs(kind, doc, func(k gateway.Kind, id string) error {
		_, err := a.store.Get(ctx, k, id)
		if errors.Is(err, gateway.ErrNotFound) {
			return gateway.ErrRefMissing
		}
		return err
	})
}

// checkRefs is check with references looked up by refs (nil: not
// checked, as a standalone configuration's).
func (a *api) checkRefs(kind gateway.Kind, doc map[string]any, refs gateway.RefChecker) error {
	if a.opts.V3 {
		doc = deepCopy(doc).(map[string]any)
		up := doc
		if kind != gateway.KindUpstream {
			up, _ = doc["upstream"].(map[string]any)
		}
		// 3.x's upstream schema has additionalProperties false (2.14 kept
		// unknown fields).
		props := gateway.SchemaOf(gateway.KindUpstream).Properties
		for _, k := range slices.Sorted(maps.Keys(up)) {
			if _, ok := props[k]; !ok {
				return &gateway.ValidationError{Msg: "invalid configuration: additional properties forbidden, found " + k}
			}
		}
	}
	return gateway.Check(kind, doc, a.reg, refs)
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

// forbiddenTimes is APISIX 3.x's check_forbidden_properties: PUT and POST
// may not set create_time or update_time, on the resource, its inline
// upstream or its plugins (PATCH may).
func forbiddenTimes(doc map[string]any) string {
	for _, where := range []string{"", "upstream.", "plugins."} {
		m := doc
		if where != "" {
			m, _ = doc[strings.TrimSuffix(where, ".")].(map[string]any)
		}
		for _, k := range []string{"create_time", "update_time"} {
			if v, ok := m[k]; ok && v != nil && v != false {
				return "the property is forbidden:  " + where + k
			}
		}
	}
	return ""
}

// uniqueKeys are the auth plugins' fields that name one consumer (APISIX
// 3.x's plugin_unique_key_attrs, for the plugins linkgate has).
var uniqueKeys = map[string]string{"key-auth": "key", "basic-auth": "username", "jwt-auth": "key"}

// duplicateKey is APISIX 3.x's check_duplicate_key: another consumer or
// credential already holding one of doc's auth keys is refused, with its
// name. A consumer's write (credID "") does not conflict with the
// consumer itself nor its credentials; a credential's only with itself.
func (a *api) duplicateKey(ctx context.Context, doc map[string]any, username, credID string) (string, error) {
	plugins, _ := doc["plugins"].(map[string]any)
	if len(plugins) == 0 {
		return "", nil
	}
	es, err := a.store.List(ctx, gateway.KindConsumer)
	if err != nil {
		return "", err
	}
	for _, plugin := range slices.Sorted(maps.Keys(plugins)) {
		attr, ok := uniqueKeys[plugin]
		conf, _ := plugins[plugin].(map[string]any)
		want, _ := conf[attr].(string)
		if !ok || want == "" || gateway.IsSecretRef(want) {
			continue
		}
		for _, e := range es {
			owner, cred, isCred := gateway.ParseCredentialKey(e.ID)
			if !isCred {
				owner = e.ID
			}
			if owner == username && (credID == "" || cred == credID) {
				continue
			}
			var other struct {
				Plugins map[string]map[string]any `json:"plugins"`
			}
			if json.Unmarshal(e.Value, &other) != nil {
				continue
			}
			if got, _ := other.Plugins[plugin][attr].(string); got == want {
				by := "consumer: " + owner
				if isCred {
					by = "credential: " + cred + " of consumer: " + owner
				}
				return fmt.Sprintf("duplicate %s of plugin %s found with %s", attr, plugin, by), nil
			}
		}
	}
	return "", nil
}

// timesForbidden answers 400 under v3 when doc sets a time (forbiddenTimes).
func (a *api) timesForbidden(w http.ResponseWriter, doc map[string]any) bool {
	if !a.opts.V3 {
		return false
	}
	if msg := forbiddenTimes(doc); msg != "" {
		writeErr(w, http.StatusBadRequest, msg)
		return true
	}
	return false
}

// stampTimes is apisix/admin/utils.lua's inject_timestamp: create_time
// from the previous value (or now) unless given; update_time now unless
// given — and for PATCH now unless the patch itself gives it.
func (a *api) stampTimes(doc map[string]any, prev *gateway.Entry, patch bool, patchDoc map[string]any) {
	now := json.Number(strconv.FormatInt(a.opts.Now().Unix(), 10))
	if _, ok := doc["create_time"]; !ok {
		doc["create_time"] = now
		if prev != nil {
			var old struct {
				CreateTime json.Number `json:"create_time"`
			}
			if json.Unmarshal(prev.Value, &old) == nil && old.CreateTime != "" {
				doc["create_time"] = old.CreateTime
			}
		}
	}
	_, given := doc["update_time"]
	if patch {
		_, given = patchDoc["update_time"]
	}
	if !given {
		doc["update_time"] = now
	}
}

// write stores doc; prevRev > 0 makes it conditional (PATCH).
func (a *api) write(w http.ResponseWriter, r *http.Request, kind gateway.Kind, id string, doc map[string]any, action string, prevRev int64) {
	if kind == gateway.KindSSL {
		gateway.EncryptSSLKeys(doc, a.reg.SSLKeys())
	}
	value, err := json.Marshal(doc)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	e, created, err := a.store.Put(r.Context(), kind, id, value, prevRev)
	if err != nil {
		a.storeErr(w, r, err)
		return
	}
	status := http.StatusOK
	switch {
	case action == "compareAndSwap", action == "create", created:
		status = http.StatusCreated // etcd set of a new key, push, atomic_set
	}
	a.log.Info("admin write", "action", action, "key", a.key(kind, id), "revision", e.ModifiedIndex)
	if a.opts.V3 {
		writeJSON(w, status, a.node(e, false)) // 3.x strips the indexes of writes too
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

func (a *api) delete(w http.ResponseWriter, r *http.Request, req *request) {
	ctx := r.Context()
	kind, id := req.res.kind, req.id
	if id == "" {
		writeErr(w, http.StatusBadRequest, req.res.missingID)
		return
	}
	if msg, err := a.inUse(ctx, kind, id); err != nil {
		a.storeErr(w, r, err)
		return
	} else if msg != "" {
		writeErr(w, http.StatusBadRequest, msg)
		return
	}
	if kind == gateway.KindConsumer {
		if err := a.deleteCredentials(ctx, id); err != nil {
			a.storeErr(w, r, err)
			return
		}
	}
	if err := a.store.Delete(ctx, kind, id); err != nil {
		a.storeErr(w, r, err)
		return
	}
	a.deleted(w, kind, id)
}

// deleted answers a successful DELETE of kind/id.
func (a *api) deleted(w http.ResponseWriter, kind gateway.Kind, id string) {
	a.log.Info("admin write", "action", "delete", "key", a.key(kind, id))
	if a.opts.V3 {
		writeJSON(w, http.StatusOK, map[string]any{"deleted": "1", "key": a.key(kind, id)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"action": "delete", "deleted": "1", "key": a.key(kind, id), "node": map[string]any{}})
}

// deleteCredentials removes a consumer's credentials (APISIX 3.x's rmdir
// of its credentials directory before the consumer is deleted).
func (a *api) deleteCredentials(ctx context.Context, username string) error {
	es, err := a.store.List(ctx, gateway.KindConsumer)
	if err != nil {
		return err
	}
	for _, e := range es {
		if owner, _, ok := gateway.ParseCredentialKey(e.ID); ok && owner == username {
			if err := a.store.Delete(ctx, gateway.KindConsumer, e.ID); err != nil && !errors.Is(err, gateway.ErrNotFound) {
				return err
			}
		}
	}
	return nil
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
	case gateway.KindConsumerGroup:
		field, users, what = "group_id", []gateway.Kind{gateway.KindConsumer}, "can not delete this consumer group"
	default:
		return "", nil
	}
	if kind == gateway.KindUpstream {
		// APISIX 3.x also looks in traffic-split's weighted upstreams, of
		// every resource that has plugins.
		users = []gateway.Kind{gateway.KindRoute, gateway.KindService, gateway.KindPluginConfig, gateway.KindConsumer, gateway.KindConsumerGroup, gateway.KindGlobalRule}
	}
	for _, uk := range users {
		es, err := a.store.List(ctx, uk)
		if err != nil {
			return "", err
		}
		for _, e := range es {
			v, err := gateway.DecodeJSON(e.Value)
			if err != nil {
				continue
			}
			doc, _ := v.(map[string]any)
			if kind == gateway.KindUpstream && splitUses(doc, id) {
				name := map[gateway.Kind]string{gateway.KindPluginConfig: "plugin_config", gateway.KindConsumerGroup: "consumer_group", gateway.KindGlobalRule: "global_rules"}[uk]
				if name == "" {
					name = uk.Singular()
				}
				return fmt.Sprintf("%s, plugin in %s [%s] is still using it now", what, name, e.ID), nil
			}
			if uk != gateway.KindRoute && uk != gateway.KindService && kind == gateway.KindUpstream {
				continue
			}
			if ref, ok := gateway.IDString(doc[field]); ok && ref == id {
				return fmt.Sprintf("%s, %s [%s] is still using it now", what, uk.Singular(), e.ID), nil
			}
		}
	}
	return "", nil
}

// splitUses reports whether doc's traffic-split sends requests to the
// upstream id.
func splitUses(doc map[string]any, id string) bool {
	plugins, _ := doc["plugins"].(map[string]any)
	ts, _ := plugins["traffic-split"].(map[string]any)
	rules, _ := ts["rules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		ups, _ := rule["weighted_upstreams"].([]any)
		for _, u := range ups {
			wu, _ := u.(map[string]any)
			if ref, ok := gateway.IDString(wu["upstream_id"]); ok && ref == id {
				return true
			}
		}
	}
	return false
}

// patch is apisix/admin/<kind>.lua's patch: merge the body into the stored
// value (core.table.merge: objects merge, arrays and scalars replace, null
// deletes) or, with a sub-path such as upstream/nodes, set the value at
// that path (core.table.patch); then check and write conditionally on the
// revision read (201 compareAndSwap).
func (a *api) patch(w http.ResponseWriter, r *http.Request, req *request) {
	ctx := r.Context()
	if req.id == "" {
		writeErr(w, http.StatusBadRequest, req.res.missingID)
		return
	}
	if !req.hasBody {
		writeErr(w, http.StatusBadRequest, "missing new configuration")
		return
	}
	patchDoc, isObject := req.conf.(map[string]any)
	if req.sub == "" && !isObject {
		writeErr(w, http.StatusBadRequest, "invalid configuration")
		return
	}
	e, err := a.store.Get(ctx, req.res.kind, req.id)
	if err != nil {
		a.storeErr(w, r, err)
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
	if req.sub != "" {
		v, err := setPath(doc, req.sub, req.conf)
		if err != nil {
			writeErr(w, http.StatusBadRequest, err.Error())
			return
		}
		if doc, isObject = v.(map[string]any); !isObject {
			writeErr(w, http.StatusBadRequest, "invalid configuration")
			return
		}
		a.stampTimes(doc, nil, true, nil)
	} else {
		doc = merge(doc, patchDoc)
		a.stampTimes(doc, nil, true, patchDoc)
	}
	if _, err := resolveID(req.res, doc, req.id, true); err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := a.check(ctx, req.res.kind, doc); err != nil {
		a.validationErr(w, err)
		return
	}
	a.write(w, r, req.res.kind, req.id, doc, "compareAndSwap", e.ModifiedIndex)
}

// merge is core.table.merge: a null removes its key, objects merge into
// objects, anything else replaces. An object that lands where the stored
// value has no object to merge into is merged into an empty one, so its
// nulls are dropped too: {"plugins":{"proxy-rewrite":null}} leaves no
// proxy-rewrite whatever the route held (APISIX keeps that null, then
// refuses it as "invalid plugin conf null").
func merge(origin, extend map[string]any) map[string]any {
	for k, v := range extend {
		switch x := v.(type) {
		case nil:
			delete(origin, k)
		case map[string]any:
			o, ok := origin[k].(map[string]any)
			if !ok {
				o = make(map[string]any, len(x))
			}
			origin[k] = merge(o, x)
		default:
			origin[k] = v
		}
	}
	return origin
}

// setPath is core.table.patch: it returns the new value of the whole
// document (a sub-path ending in "/" replaces it).
func setPath(doc map[string]any, subPath string, v any) (any, error) {
	parts := strings.Split(subPath, "/")
	cur := doc
	for i, p := range parts[:len(parts)-1] {
		next, ok := cur[p]
		if !ok || next == nil {
			next = map[string]any{}
			cur[p] = next
		}
		m, ok := next.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("invalid sub-path: /%s", strings.Join(parts[:i+1], "/"))
		}
		cur = m
	}
	last := parts[len(parts)-1]
	if last == "" {
		return v, nil
	}
	cur[last] = v
	return doc, nil
}

// schema serves GET /apisix/admin/schema/{name} and
// /apisix/admin/schema/plugins/{name}.
func (a *api) schema(w http.ResponseWriter, r *http.Request, segs []string) {
	if r.Method == http.MethodPost && len(segs) == 2 && segs[0] == "validate" {
		a.validate(w, r, segs[1])
		return
	}
	if r.Method != http.MethodGet {
		writeErr(w, http.StatusNotFound, "not found")
		return
	}
	if len(segs) > 0 && segs[0] == "plugins" {
		name := ""
		if len(segs) > 1 {
			name = segs[1]
		}
		a.plugins(w, r, name)
		return
	}
	name := ""
	if len(segs) > 0 {
		name = segs[0]
	}
	s, ok := gateway.NamedSchema(name)
	if !ok {
		writeErr(w, http.StatusBadRequest, "not found schema: "+name)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// validateSchemas are the resources of POST /apisix/admin/schema/validate/{resource}.
var validateSchemas = map[string]string{
	"routes": "route", "services": "service", "upstreams": "upstream", "consumers": "consumer",
	"ssls": "ssl", "global_rules": "global_rule", "plugin_configs": "plugin_config",
	"stream_routes": "stream_route", "protos": "proto", "consumer_groups": "consumer_group",
}

// validate serves APISIX 3.x's POST /apisix/admin/schema/validate/{resource}:
// the body checked against the resource's schema alone (not its plugins'
// nor its references), 200 with no body or 400 with the reason; nothing
// is stored.
func (a *api) validate(w http.ResponseWriter, r *http.Request, resource string) {
	name, ok := validateSchemas[resource]
	s, found := gateway.NamedSchema(name)
	if !ok || !found {
		writeErr(w, http.StatusNotFound, "Unsupported resource type: "+resource)
		return
	}
	req := &request{}
	if !a.readBody(w, r, req) {
		return
	}
	if err := s.Validate(deepCopy(req.conf)); err != nil {
		a.validationErr(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case map[string]any:
		return "table"
	case []any:
		return "table"
	case nil:
		return "nil"
	}
	return "number"
}

// plugins serves GET /apisix/admin/plugins/{name}: the plugin's schema
// (?schema_type=consumer: its consumer schema), or with ?all=true every
// plugin's attributes.
func (a *api) plugins(w http.ResponseWriter, r *http.Request, name string) {
	if r.Method != http.MethodGet {
		writeErr(w, http.StatusNotFound, "not found")
		return
	}
	q := r.URL.Query()
	// 3.x: ?subsystem=http (the default) or stream, which has none of
	// linkgate's plugins.
	sub := q.Get("subsystem")
	if sub == "" {
		sub = "http"
	}
	if a.opts.V3 && sub != "http" && sub != "stream" {
		writeErr(w, http.StatusBadRequest, "unsupported subsystem: "+sub)
		return
	}
	if q.Get("all") == "true" {
		out := map[string]any{}
		if q.Get("subsystem") != "stream" {
			for _, n := range a.reg.Names() {
				f, _ := a.reg.Get(n)
				info := map[string]any{"priority": f.Priority(), "version": 0.1, "schema": pluginSchema(f.Schema())}
				if au, ok := f.(gateway.Authenticator); ok {
					info["type"] = "auth"
					info["consumer_schema"] = au.ConsumerSchema()
				}
				out[n] = info
			}
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	if name == "" {
		writeErr(w, http.StatusBadRequest, "not found plugin name")
		return
	}
	f, ok := a.reg.Get(name)
	if a.opts.V3 {
		if !ok || sub == "stream" {
			writeErr(w, http.StatusNotFound, "plugin not found in subsystem "+sub)
			return
		}
	}
	if !ok {
		writeErr(w, http.StatusBadRequest, "failed to load plugin "+name)
		return
	}
	s := pluginSchema(f.Schema())
	if q.Get("schema_type") == "consumer" {
		au, ok := f.(gateway.Authenticator)
		if !ok {
			writeErr(w, http.StatusBadRequest, "not found schema")
			return
		}
		s = au.ConsumerSchema()
	}
	writeJSON(w, http.StatusOK, s)
}

// pluginSchema is a plugin's schema with the "disable" property APISIX
// injects into every plugin's (plugin_injected_schema).
func pluginSchema(s *gateway.Schema) any {
	b, _ := json.Marshal(s)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props["disable"] = map[string]any{"type": "boolean"}
	m["properties"] = props
	m["$comment"] = "this is a mark for our injected plugin schema"
	return m
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
