package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/linkgate/linkgate/gateway"
)

// Standalone is the store of APISIX 3.x's API-driven standalone mode
// (linkgate's file store): its whole configuration is read and replaced
// at once by /apisix/admin/configs.
type Standalone interface {
	// Document is the configuration with every <key>_conf_version, the
	// last replacement's digest ("" before any) and time (unix seconds).
	Document() (doc map[string]any, digest string, lastModified int64)
	// Replace applies body (already validated) under APISIX's
	// conf_version rules and serves it before returning; changed is
	// false when digest is the last replacement's. A
	// *gateway.ValidationError is the client's; other errors are ours.
	Replace(body map[string]any, digest string, now time.Time) (lastModified int64, changed bool, err error)
}

// MaxConfigBody is the largest configuration PUT /apisix/admin/configs
// reads: a whole gateway's resources, so above MaxBody; as much as the
// data listener hands the admin API (gateway/proxy's maxAdminBody).
const MaxConfigBody = 4 << 20

// ConfigReadTimeout bounds reading PUT /apisix/admin/configs' body.
const ConfigReadTimeout = 30 * time.Second

// The headers of APISIX's standalone.lua (not Last-Modified, so that no
// HTTP cache acts on them).
const (
	headerDigest       = "X-Digest"
	headerLastModified = "X-Last-Modified"
)

// configs serves /apisix/admin/configs on a Standalone store, as APISIX
// 3.18's apisix/admin/standalone.lua: PUT replaces, GET shows (JSON, or
// YAML for Accept: application/yaml), HEAD gives the metadata headers.
func (a *api) configs(w http.ResponseWriter, r *http.Request, id string) {
	switch {
	case r.Method == http.MethodPost && id == "validate":
		a.validateConfigs(w, r)
	case id != "" || r.Method == http.MethodPost:
		writeErr(w, http.StatusNotFound, "Not found")
	case r.Method == http.MethodPut:
		a.replaceConfig(w, r)
	case r.Method == http.MethodHead:
		_, digest, modified := a.opts.Standalone.Document()
		setConfigMeta(w, digest, modified)
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodGet:
		a.showConfig(w, r)
	default:
		writeErr(w, http.StatusMethodNotAllowed, "not supported `"+r.Method+"` method for configs")
	}
}

func setConfigMeta(w http.ResponseWriter, digest string, modified int64) {
	if digest != "" {
		w.Header().Set(headerDigest, digest)
	}
	if modified != 0 {
		w.Header().Set(headerLastModified, strconv.FormatInt(modified, 10))
	}
}

func (a *api) showConfig(w http.ResponseWriter, r *http.Request) {
	doc, digest, modified := a.opts.Standalone.Document()
	setConfigMeta(w, digest, modified)
	if !strings.HasPrefix(r.Header.Get("Accept"), "application/yaml") {
		writeJSON(w, http.StatusOK, doc)
		return
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "failed to encode yaml")
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (a *api) replaceConfig(w http.ResponseWriter, r *http.Request) {
	if len(r.Header.Values(headerDigest)) == 0 {
		writeErr(w, http.StatusBadRequest, "missing digest header")
		return
	}
	digest := r.Header.Get(headerDigest)
	// The server's timeouts are the admin API's; a configuration gets its
	// own (not on the data listener, whose body is already read).
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(ConfigReadTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		a.log.Debug("admin: no read deadline", "err", err)
	}
	doc, ok := readConfig(w, r, MaxConfigBody)
	if !ok {
		return
	}
	if _, cur, _ := a.opts.Standalone.Document(); cur != "" && cur == digest {
		w.WriteHeader(http.StatusNoContent) // accepted, not modified: the same digest
		return
	}
	if problems := a.checkConfig(doc); len(problems) > 0 {
		writeErr(w, http.StatusBadRequest, problems[0].first)
		return
	}
	modified, changed, err := a.opts.Standalone.Replace(doc, digest, a.opts.Now())
	var ve *gateway.ValidationError
	switch {
	case errors.As(err, &ve):
		writeErr(w, http.StatusBadRequest, ve.Msg)
		return
	case err != nil:
		a.log.Error("admin: configuration not replaced", "err", err)
		writeErr(w, http.StatusInternalServerError, "failed to save the configuration: "+err.Error())
		return
	case !changed:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	setConfigMeta(w, digest, modified)
	w.WriteHeader(http.StatusAccepted)
}

// readConfig reads and decodes a configuration of at most limit bytes;
// false when it answered (4xx).
func readConfig(w http.ResponseWriter, r *http.Request, limit int64) (map[string]any, bool) {
	body, ok := readLimited(w, r, limit)
	if !ok {
		return nil, false
	}
	if len(body) == 0 {
		writeErr(w, http.StatusBadRequest, "invalid request body: empty request body")
		return nil, false
	}
	doc, err := decodeConfig(body, r.Header.Get("Content-Type"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return nil, false
	}
	return doc, true
}

// decodeConfig decodes a configuration, YAML when contentType says so
// (as APISIX: a prefix application/yaml), else JSON, into the values
// gateway.DecodeJSON makes.
func decodeConfig(body []byte, contentType string) (map[string]any, error) {
	if strings.HasPrefix(contentType, "application/yaml") {
		var v any
		if err := yaml.Unmarshal(body, &v); err != nil {
			return nil, errors.New("invalid yaml request body")
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, errors.New("invalid yaml request body")
		}
		b, err := json.Marshal(gateway.StringKeys(v))
		if err != nil {
			return nil, errors.New("invalid yaml request body")
		}
		body = b
	}
	v, err := gateway.DecodeJSON(body)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return doc, nil
}

// readLimited reads r's body up to limit: 413 above it, 408 when the
// read deadline passes, 400 on another error; false when it answered.
func readLimited(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	tooLarge := func(n int64) {
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("invalid request body: request size %d is greater than the maximum size %d allowed", n, limit))
	}
	if r.ContentLength > limit {
		tooLarge(r.ContentLength)
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeErr(w, http.StatusRequestTimeout, "invalid request body: not read in time")
		return nil, false
	case err != nil:
		writeErr(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return nil, false
	case int64(len(body)) > limit:
		tooLarge(int64(len(body)))
		return nil, false
	}
	return body, true
}

// configKinds are the resources of a standalone configuration that
// POST /apisix/admin/configs/validate checks, by their key in it.
var configKinds = map[string]gateway.Kind{
	"routes": gateway.KindRoute, "services": gateway.KindService, "upstreams": gateway.KindUpstream,
	"consumers": gateway.KindConsumer, "ssls": gateway.KindSSL, "global_rules": gateway.KindGlobalRule,
	"plugin_configs": gateway.KindPluginConfig, "consumer_groups": gateway.KindConsumerGroup,
	"stream_routes": gateway.KindStreamRoute, "plugin_metadata": gateway.KindPluginMetadata,
}

// validateConfigs serves APISIX 3.x's POST /apisix/admin/configs/validate:
// a whole standalone configuration (JSON: {"routes": [...], ...,
// "routes_conf_version": N}, or YAML) checked as the admin API checks each
// resource, references aside, every error collected; nothing is stored.
// 200 {} when valid, else 400 with one {resource_type, resource_id,
// index, error} per problem.
func (a *api) validateConfigs(w http.ResponseWriter, r *http.Request) {
	doc, ok := readConfig(w, r, MaxBody)
	if !ok {
		return
	}
	problems := a.checkConfig(doc)
	if len(problems) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error_msg": "Configuration validation failed", "errors": problems})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// problem is one finding of checkConfig, as configs/validate lists it;
// first is the message PUT answers when it is the first.
type problem struct {
	Type  string `json:"resource_type"`
	ID    any    `json:"resource_id,omitempty"`
	Index *int   `json:"index,omitempty"`
	Error string `json:"error"`
	first string
}

// checkConfig checks a standalone configuration as APISIX's
// config_validate.validate_configuration: each resource as the admin API
// checks it, references aside; duplicate ids; conf versions that are not
// numbers.
func (a *api) checkConfig(doc map[string]any) []problem {
	var problems []problem
	add := func(p problem) {
		if p.first == "" {
			p.first = p.Error
		}
		problems = append(problems, p)
	}
	for _, key := range slices.Sorted(maps.Keys(configKinds)) {
		if v, ok := doc[key+"_conf_version"]; ok {
			if _, isNum := v.(json.Number); !isNum {
				add(problem{Type: key, Error: fmt.Sprintf("%s_conf_version must be a number, got %s", key, jsonType(v)),
					first: key + "_conf_version must be a number"})
			}
		}
		items, _ := doc[key].([]any)
		seen := map[string]bool{}
		for i, it := range items {
			item, _ := it.(map[string]any)
			idx := i
			id, word := item["id"], "id"
			if key == "consumers" && id == nil {
				id, word = item["username"], "username"
			} else if key == "consumers" {
				word = "credential id"
			}
			if item == nil {
				add(problem{Type: key, Index: &idx, Error: "invalid configuration: not an object"})
				continue
			}
			check := func(doc map[string]any) error { return a.checkRefs(configKinds[key], doc, nil) }
			if s, _ := id.(string); key == "consumers" {
				if _, _, cred := gateway.ParseCredentialKey(s); cred {
					check = func(doc map[string]any) error { return gateway.CheckCredential(doc, a.reg) }
				}
			}
			item = deepCopy(item).(map[string]any)
			delete(item, "modifiedIndex") // the standalone schemas' (APISIX's patch_schema)
			if err := check(item); err != nil {
				msg := err.Error()
				var ve *gateway.ValidationError
				if errors.As(err, &ve) {
					msg = ve.Msg
				}
				add(problem{Type: key, ID: orEmpty(id), Index: &idx, Error: msg})
			}
			if s, ok := gateway.IDString(id); ok {
				if seen[s] {
					add(problem{Type: key, ID: id, Index: &idx, Error: fmt.Sprintf("found duplicate %s %s in %s", word, s, key)})
				}
				seen[s] = true
			}
		}
	}
	return problems
}
