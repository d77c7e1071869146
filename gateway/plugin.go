package gateway

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"slices"
	"time"
)

// Ctx is one request as plugins see it. The engine (gateway/proxy)
// implements it with one pooled value per request, so calls allocate
// nothing. Strings it returns are valid only during the call's phase:
// a plugin that keeps one copies it (strings.Clone).
type Ctx interface {
	// Var returns an APISIX variable: remote_addr, remote_port,
	// server_addr, server_port, uri, request_uri, query_string, host,
	// scheme, request_method, http_<header>, arg_<name>, cookie_<name>,
	// consumer_name, route_id, service_id; "" when unset.
	Var(name string) string
	// SetUpstreamURI replaces the path (and query) sent upstream.
	SetUpstreamURI(uri string)
	// SetUpstreamHost sets the Host header sent upstream.
	SetUpstreamHost(host string)
	// SetUpstreamHeader sets a request header sent upstream; "" removes it.
	SetUpstreamHeader(name, value string)
	// SetResponseHeader sets a header of the response to the client.
	SetResponseHeader(name, value string)
	// SetResponseHeaderInt is SetResponseHeader for a number, without allocating.
	SetResponseHeaderInt(name string, v int64)
	// Consumer is the consumer an auth plugin identified, or nil.
	Consumer() *ConsumerEntry
	// SetConsumer records the consumer an auth plugin identified.
	SetConsumer(c *ConsumerEntry)
	// Expand replaces each $name in tmpl with the variable's value.
	Expand(tmpl string) string
	// LookupConsumer finds the consumer whose plugin configuration carries
	// credential (key-auth's key), or nil.
	LookupConsumer(plugin, credential string) *ConsumerEntry
}

// Reply ends a request from a plugin: status and body sent to the client.
// The zero Reply lets the request go on.
type Reply struct {
	Status int
	Body   []byte
}

// Plugin phases, in the order the engine runs them. An instance implements
// any of them.
type (
	// Rewriter runs first (key-auth, proxy-rewrite).
	Rewriter interface{ Rewrite(c Ctx) Reply }
	// Accessor runs after every rewrite (limit-count).
	Accessor interface{ Access(c Ctx) Reply }
	// Logger runs after the response is sent (prometheus).
	Logger interface{ Log(c Ctx, e *LogEntry) }
)

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
	RequestLength           int64
	BytesSent               int64
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

// Registry is the explicit set of plugins a gateway offers.
type Registry struct {
	byName map[string]Factory
}

// NewRegistry returns a registry of fs.
func NewRegistry(fs ...Factory) *Registry {
	r := &Registry{byName: map[string]Factory{}}
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

// Names lists the plugins, sorted.
func (r *Registry) Names() []string {
	return sortedKeys(r.byName)
}

// Check validates a plugins object as APISIX does, filling defaults in.
// Consumers' configurations of auth plugins use the consumer schema.
func (r *Registry) Check(plugins map[string]any, consumer bool) error {
	for _, name := range sortedKeys(plugins) {
		f, ok := r.byName[name]
		if !ok {
			return &ValidationError{Msg: fmt.Sprintf("unknown plugin [%s]", name), Reason: SkipUnknownPlugin}
		}
		conf, ok := plugins[name].(map[string]any)
		if !ok {
			return invalidf("failed to check the configuration of plugin %s err: wrong type: expected object, got %s", name, jsonType(plugins[name]))
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
		if hasDisable {
			conf["disable"] = disable
		}
		if hasMeta {
			conf["_meta"] = meta
		}
		if err != nil {
			return invalidf("failed to check the configuration of plugin %s err: %v", name, err)
		}
	}
	return nil
}

// Instance is one configured plugin in a chain.
type Instance struct {
	Name     string
	Priority int
	Impl     any // implements some of Rewriter, Accessor, Logger
}

// Chain is a list of plugin instances ordered by priority, highest first.
type Chain []Instance

// Build instantiates plugins for scope, skipping disabled ones.
func (r *Registry) Build(plugins Plugins, scope Scope) (Chain, error) {
	var c Chain
	for _, name := range sortedKeys(plugins) {
		f, ok := r.byName[name]
		if !ok {
			return nil, &buildError{SkipUnknownPlugin, fmt.Errorf("%s: unknown plugin [%s]", scope, name)}
		}
		raw := plugins[name]
		var meta struct {
			Disable bool `json:"disable"`
		}
		_ = json.Unmarshal(raw, &meta)
		if meta.Disable {
			continue
		}
		impl, err := f.New(raw, scope)
		if err != nil {
			return nil, &buildError{SkipPluginError, fmt.Errorf("%s: plugin %s: %w", scope, name, err)}
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
