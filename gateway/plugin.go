package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"slices"
	"time"
)

// Ctx is one request as plugins see it. The engine (gateway/proxy)
// implements it with one pooled value per request, so calls allocate
// nothing. Strings it returns are valid only during the call's phase:
// a plugin that keeps one copies it (strings.Clone).
type Ctx interface {
	// Var returns an APISIX variable: remote_addr, remote_port,
	// realip_remote_addr, server_addr, server_port, uri, request_uri,
	// query_string (args), is_args, host, scheme, request_method,
	// server_protocol, status, balancer_ip, balancer_port, upstream_addr,
	// http_<header>, arg_<name>, cookie_<name>,
	// consumer_name, route_id, route_name, service_id; "" when unset.
	Var(name string) string
	// SetUpstreamURI replaces the path (and query) sent upstream.
	SetUpstreamURI(uri string)
	// SetUpstreamHost sets the Host header sent upstream.
	SetUpstreamHost(host string)
	// SetUpstreamHeader sets a request header sent upstream; "" removes it.
	SetUpstreamHeader(name, value string)
	// AddUpstreamHeader adds a request header line sent upstream, keeping
	// the lines of that name already there (ngx.req.set_header's table
	// value, proxy-rewrite's headers.add).
	AddUpstreamHeader(name, value string)
	// RequestHeaders calls fn with each request header (its name
	// lowercased), as it will go upstream; name and value are valid
	// during the call only.
	RequestHeaders(fn func(name, value string))
	// SetUpstreamMethod replaces the method sent upstream (and
	// $request_method for later phases, as nginx's ngx.req.set_method).
	SetUpstreamMethod(method string)
	// SetUpstreamScheme sets "http" or "https" for the connection to the
	// upstream's nodes, whatever the upstream's own scheme (APISIX's
	// ctx.upstream_scheme); a node without a port then answers 503, as
	// APISIX cannot tell its port either.
	SetUpstreamScheme(scheme string)
	// SetResponseHeader sets a header of the response to the client; ""
	// removes it. Set before the response exists (rewrite, access), it is
	// applied to whatever answers, upstream or plugin; in the header
	// filter phase it changes the response in place.
	SetResponseHeader(name, value string)
	// SetResponseHeaderInt is SetResponseHeader for a number, without allocating.
	SetResponseHeaderInt(name string, v int64)
	// AddResponseHeader adds a value to a response header, keeping the
	// values already there (Vary), as SetResponseHeader does otherwise.
	AddResponseHeader(name, value string)
	// ResponseHeader returns a header of the response (header filter phase).
	ResponseHeader(name string) string
	// ResponseHeaders calls fn with each header of the response (its name
	// lowercased) once it is known (header filter and log phases); name
	// and value are valid during the call only.
	ResponseHeaders(fn func(name, value string))
	// Status is the response status (header filter and log phases).
	Status() int
	// SetStatus replaces the response status (header filter phase).
	SetStatus(code int)
	// RemoteAddr is the client address, as remote_addr.
	RemoteAddr() netip.Addr
	// SetRemoteAddr replaces the client address (and port, if not 0) for
	// the rest of the request: variables, forwarded headers, limits and
	// logs all see it (real-ip).
	SetRemoteAddr(addr netip.Addr, port int)
	// SetUpstream sends the request to ref's upstream instead of the
	// route's; nil restores the route's (traffic-split). ref must be one
	// of the instance's UpstreamChooser.Upstreams.
	SetUpstream(ref *UpstreamRef)
	// Buffer returns n bytes owned by the request, valid until it ends and
	// reused by later requests: for values a plugin builds per request
	// (request-id's id, redirect's Location) without allocating.
	Buffer(n int) []byte
	// SetValue and Value keep a number per request under key, typically
	// the instance itself: what one phase tells a later one (limit-conn's
	// counted connection, response-rewrite's vars match).
	SetValue(key any, v int64)
	Value(key any) (int64, bool)
	// SetText and Text keep a string the same way (cors's Origin as the
	// client sent it); s must stay valid for the request (see Buffer).
	SetText(key any, s string)
	Text(key any) (string, bool)
	// Consumer is the consumer an auth plugin identified, or nil.
	Consumer() *ConsumerEntry
	// SetConsumer records the consumer an auth plugin identified.
	SetConsumer(c *ConsumerEntry)
	// Expand replaces each $name and ${name} in tmpl with the variable's
	// value, as APISIX's core.utils.resolve_var (ExpandVars).
	Expand(tmpl string) string
	// LookupConsumer finds the consumer whose plugin configuration carries
	// credential (key-auth's key), or nil.
	LookupConsumer(plugin, credential string) *ConsumerEntry
}

// Reply ends a request from a plugin: status and body sent to the client.
// The zero Reply lets the request go on. A body is sent as JSON unless
// ContentType says otherwise; without a body, an error status gets nginx's
// error page and a 1xx-3xx status an empty body.
type Reply struct {
	Status      int
	Body        []byte
	ContentType string
}

// JSONReply is a Reply whose body is {key: msg}, as APISIX's
// core.response.exit(status, {key = msg}) writes it. Plugins build theirs
// once per instance.
func JSONReply(status int, key, msg string) Reply {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{key: msg})
	return Reply{Status: status, Body: b.Bytes()}
}

// Plugin phases, in the order the engine runs them. An instance implements
// any of them. Global rules run before the route's plugins in every phase;
// the header filter, body filter and log phases run for every response,
// including a plugin's Reply and 404.
type (
	// Rewriter runs first (key-auth, proxy-rewrite).
	Rewriter interface{ Rewrite(c Ctx) Reply }
	// Accessor runs after every rewrite (limit-count).
	Accessor interface{ Access(c Ctx) Reply }
	// HeaderFilter runs once the response's status and headers are known,
	// before they are sent (cors, request-id).
	HeaderFilter interface{ FilterHeaders(c Ctx) }
	// Logger runs after the response is sent (prometheus).
	Logger interface{ Log(c Ctx, e *LogEntry) }
)

// Body phases. Implementing either declares that the instance needs the
// whole response body: the engine buffers the responses of a route (or
// global rule) that has one, and may stream all others. A factory whose
// configuration does not touch the body returns an instance without them.
type (
	// BodyFilter rewrites the response body (response-rewrite): it returns
	// body unchanged, or the new body appended to dst (a buffer the engine
	// owns and reuses), or any slice that stays valid for the request.
	// Body filters run after every header filter, by priority.
	BodyFilter interface {
		FilterBody(c Ctx, dst, body []byte) []byte
	}
	// BodyEncoder is a content encoding (gzip), as dst/body in BodyFilter:
	// it runs after every body filter, on what they left.
	BodyEncoder interface {
		EncodeBody(c Ctx, dst, body []byte) []byte
	}
)

// BodyCapture is implemented by the engine's Ctx: the first bytes of the
// request and response bodies, for a plugin that logs them (http-logger's
// include_req_body and include_resp_body). Only the requests whose
// plugins ask pay for them; bodies still stream.
type BodyCapture interface {
	// RequestBody returns at most max bytes from the start of the request
	// body, valid for the request. Asked before the upstream is (rewrite,
	// access), it reads a streamed body that far and no further: those
	// bytes and the rest still go upstream. Later, it returns what was
	// read then (nil if nothing was and the body has gone upstream).
	RequestBody(max int) []byte
	// CaptureResponseBody asks for the first max bytes of the response
	// body (before the body phase's encoders), kept as it goes to the
	// client; call it up to the header filter phase.
	CaptureResponseBody(max int)
	// ResponseBody returns the captured bytes in the log phase, and the
	// content coding they are in ("" for none).
	ResponseBody() (body []byte, encoding string)
}

// UpstreamRef names an upstream a plugin may send a request to: one of the
// configuration's by ID, or Inline. Key names its runtime state (balancer,
// health, connection pool): "upstreams/<id>" for an ID, else unique to the
// instance (for example "routes/1#traffic-split/0/1").
type UpstreamRef struct {
	ID     string
	Inline *Upstream
	Key    string
}

// UpstreamChooser is implemented by instances that may send a request
// elsewhere than the route's upstream (traffic-split): the engine prepares
// every upstream they list when it loads a configuration.
type UpstreamChooser interface {
	Upstreams() []*UpstreamRef
}

// LogEntry is what the log phase knows about a finished request.
type LogEntry struct {
	Status                  int
	RouteID, ServiceID      string
	RouteName, ServiceName  string
	Consumer                string
	MatchedURI, MatchedHost string
	Node                    string // host of the upstream node that answered, "" if none
	RequestTime             time.Duration
	UpstreamTime            time.Duration // 0 when no upstream was reached
	// UpstreamStatus is the status of the last upstream attempt, as the
	// last of nginx's $upstream_status: 502 or 504 for a failed attempt,
	// 0 when no upstream was tried (a plugin answered).
	UpstreamStatus int
	RequestLength  int64
	BytesSent      int64
}

// Scope names the resource a plugin instance is configured on: its
// counters and metrics are keyed by it, never by a config version.
type Scope struct {
	Kind Kind
	ID   string
}

// String is "routes/1".
func (s Scope) String() string { return string(s.Kind) + "/" + s.ID }

// Factory makes one plugin. Factories live as long as the process and hold
// shared state (counters, metric collectors, redis pools); the instances
// they make live as long as one config snapshot.
type Factory interface {
	Name() string
	// Priority orders plugins within a phase, highest first (APISIX's values).
	Priority() int
	// Schema validates a configuration and fills its defaults.
	Schema() *Schema
	// New builds an instance from a validated configuration.
	New(conf json.RawMessage, scope Scope) (any, error)
}

// ConfChecker is implemented by factories with rules a schema cannot say.
type ConfChecker interface {
	CheckConf(conf map[string]any) error
}

// Authenticator is implemented by auth plugin factories: it validates a
// consumer's configuration of the plugin and reads the credential from it.
type Authenticator interface {
	ConsumerSchema() *Schema
	Credential(conf json.RawMessage) (string, error)
}

// ConsumerChecker is implemented by auth factories with consumer-side rules
// a schema cannot say; it may fill values in (jwt-auth's generated secret).
type ConsumerChecker interface {
	CheckConsumerConf(conf map[string]any) error
}

// AuthPreparer is implemented by auth factories that need more of a
// consumer's configuration than its credential (basic-auth's password,
// jwt-auth's keys): what it returns is the consumer's AuthData.
type AuthPreparer interface {
	PrepareConsumer(conf json.RawMessage) (any, error)
}

// MetadataUser is implemented by factories whose plugin reads APISIX's
// plugin metadata (/apisix/admin/plugin_metadata/{name}): one
// configuration of the plugin shared by all its instances. The metadata of
// a plugin without it is any object, stored and unused, as APISIX injects
// an empty metadata schema into such plugins.
type MetadataUser interface {
	// MetadataSchema validates the metadata and fills its defaults.
	MetadataSchema() *Schema
	// NewWithMetadata builds an instance as New does, given the plugin's
	// metadata as loaded with the same configuration (validated, defaults
	// filled in), or nil when none is stored.
	NewWithMetadata(conf, metadata json.RawMessage, scope Scope) (any, error)
}

// API is an HTTP endpoint a plugin offers (jwt-auth's
// /apisix/plugin/jwt/sign). As in APISIX, it is served only where a route
// with the public-api plugin exposes it.
type API struct {
	Method, Path string
	Serve        func(c Ctx) Reply
}

// APIProvider is implemented by factories that offer APIs.
type APIProvider interface {
	APIs() []API
}

// Registry is the explicit set of plugins a gateway offers.
type Registry struct {
	byName map[string]Factory
	// keys encrypts and decrypts the private keys of ssl resources at
	// rest (APISIX's key_encrypt_salt); nil stores them as given.
	keys *KeyCipher
	// secrets resolves $env:// (and $secret://) references in plugin
	// configurations when they are built; nil leaves them as written.
	secrets Secrets
	// metadata is the plugin metadata of the configuration being built
	// (withMetadata), by plugin name.
	metadata map[string]json.RawMessage
}

// withMetadata returns a registry that builds instances with the plugin
// metadata md (Compile's, for one configuration).
func (r *Registry) withMetadata(md map[string]json.RawMessage) *Registry {
	c := *r
	c.metadata = md
	return &c
}

// anyMetadata is APISIX's injected metadata schema of a plugin that
// declares none: any object.
var anyMetadata = &Schema{Type: "object"}

// CheckMetadata validates doc as plugin name's metadata (filling its
// defaults in), as apisix/admin/plugin_metadata.lua: "invalid plugin
// name" for a plugin the registry does not have.
func (r *Registry) CheckMetadata(name string, doc map[string]any) error {
	f, ok := r.byName[name]
	if !ok {
		return &ValidationError{Msg: "invalid plugin name", Reason: SkipUnknownPlugin}
	}
	s := anyMetadata
	if mu, ok := f.(MetadataUser); ok {
		s = mu.MetadataSchema()
	}
	return schemaCheck(s, doc)
}

// RegistryOptions are what a registry is built with besides its plugins.
type RegistryOptions struct {
	Keys    *KeyCipher // the ssl resources' private keys at rest; nil: as given
	Secrets Secrets    // references in plugin configurations; nil: as written
}

// SSLKeys is the cipher of the ssl resources' private keys; nil stores
// them as given.
func (r *Registry) SSLKeys() *KeyCipher {
	if r == nil {
		return nil
	}
	return r.keys
}

// NewRegistry returns a registry of fs that stores the private keys of ssl
// resources as given.
func NewRegistry(fs ...Factory) *Registry {
	return NewRegistryWithKeys(nil, fs...)
}

// NewRegistryWithKeys returns a registry of fs whose ssl resources' private
// keys are encrypted at rest with keys (nil: stored as given).
func NewRegistryWithKeys(keys *KeyCipher, fs ...Factory) *Registry {
	return NewRegistryWithOptions(RegistryOptions{Keys: keys}, fs...)
}

// NewRegistryWithOptions returns a registry of fs built with opts.
func NewRegistryWithOptions(opts RegistryOptions, fs ...Factory) *Registry {
	r := &Registry{byName: map[string]Factory{}, keys: opts.Keys, secrets: opts.Secrets}
	for _, f := range fs {
		r.byName[f.Name()] = f
	}
	return r
}

// Get returns the factory of a plugin.
func (r *Registry) Get(name string) (Factory, bool) {
	f, ok := r.byName[name]
	return f, ok
}

// Names lists the plugins by priority, highest first, as APISIX's
// /apisix/admin/plugins/list (ties by name).
func (r *Registry) Names() []string {
	names := sortedKeys(r.byName)
	slices.SortStableFunc(names, func(a, b string) int { return r.byName[b].Priority() - r.byName[a].Priority() })
	return names
}

// Check validates a plugins object as APISIX does, filling defaults in.
// Consumers' configurations of auth plugins use the consumer schema.
func (r *Registry) Check(plugins map[string]any, consumer bool) error {
	for _, name := range sortedKeys(plugins) {
		conf, ok := asObject(plugins[name])
		if !ok {
			b, _ := json.Marshal(plugins[name])
			return invalidf("invalid plugin conf %s for plugin [%s]", b, name)
		}
		plugins[name] = conf
		f, ok := r.byName[name]
		if !ok {
			return &ValidationError{Msg: fmt.Sprintf("unknown plugin [%s]", name), Reason: SkipUnknownPlugin}
		}
		// APISIX's "disable" switch and 3.x "_meta" are accepted on every plugin.
		disable, hasDisable := conf["disable"]
		meta, hasMeta := conf["_meta"]
		delete(conf, "disable")
		delete(conf, "_meta")
		schema := f.Schema()
		a, isAuth := f.(Authenticator)
		if isAuth && consumer {
			schema = a.ConsumerSchema()
		}
		err := schema.Validate(conf)
		if err == nil && !(isAuth && consumer) {
			if cc, ok := f.(ConfChecker); ok {
				err = cc.CheckConf(conf)
			}
		}
		if err == nil && isAuth && consumer {
			if cc, ok := f.(ConsumerChecker); ok {
				err = cc.CheckConsumerConf(conf)
			}
		}
		if hasDisable {
			conf["disable"] = disable
		}
		if hasMeta {
			conf["_meta"] = meta
		}
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) && ve.Reason == SkipUnsupported {
				return unsupportedf("failed to check the configuration of plugin %s err: %v", name, err)
			}
			return invalidf("failed to check the configuration of plugin %s err: %v", name, err)
		}
	}
	return nil
}

// Unsupported is a plugin's configuration error for a feature linkgate
// does not have: the admin API rejects it as any invalid configuration, a
// stored resource using it is skipped as SkipUnsupported.
func Unsupported(format string, args ...any) error {
	return &ValidationError{Msg: fmt.Sprintf(format, args...), Reason: SkipUnsupported}
}

// Instance is one configured plugin in a chain.
type Instance struct {
	Name     string
	Priority int
	Impl     any // implements some of Rewriter, Accessor, HeaderFilter, BodyFilter, BodyEncoder, Logger
}

// Chain is a list of plugin instances ordered by priority, highest first.
type Chain []Instance

// Build instantiates plugins for scope, skipping disabled ones.
func (r *Registry) Build(plugins Plugins, scope Scope) (Chain, error) {
	var c Chain
	for _, name := range sortedKeys(plugins) {
		f, ok := r.byName[name]
		if !ok {
			return nil, &buildError{reason: SkipUnknownPlugin, err: fmt.Errorf("%s: unknown plugin [%s]", scope, name)}
		}
		raw := plugins[name]
		// 2.14's "disable", 3.x's "_meta": {"disable": true}.
		var meta struct {
			Disable bool `json:"disable"`
			Meta    struct {
				Disable bool `json:"disable"`
			} `json:"_meta"`
		}
		_ = Unmarshal(raw, &meta)
		if meta.Disable || meta.Meta.Disable {
			continue
		}
		if r.secrets != nil {
			var err error
			if raw, err = resolveSecrets(raw, r.secrets); err != nil {
				return nil, &buildError{reason: SkipPluginError, err: fmt.Errorf("%s: plugin %s: %w", scope, name, err)}
			}
		}
		var impl any
		var err error
		if mu, ok := f.(MetadataUser); ok {
			impl, err = mu.NewWithMetadata(raw, r.metadata[name], scope)
		} else {
			impl, err = f.New(raw, scope)
		}
		if err != nil {
			return nil, &buildError{reason: SkipPluginError, err: fmt.Errorf("%s: plugin %s: %w", scope, name, err)}
		}
		c = append(c, Instance{Name: name, Priority: f.Priority(), Impl: impl})
	}
	slices.SortStableFunc(c, func(a, b Instance) int { return b.Priority - a.Priority })
	return c, nil
}

// ConfHash is a stable hash of a plugin configuration: the same settings
// give the same value on every node and across restarts.
func ConfHash(conf json.RawMessage) uint32 {
	v, err := DecodeJSON(conf)
	if err != nil {
		return crc32.ChecksumIEEE(conf)
	}
	canon, _ := json.Marshal(v) // encoding/json sorts map keys
	return crc32.ChecksumIEEE(canon)
}
