package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// Config is one consistent set of validated resources, by id. A resource
// whose stored value fails validation is not in it (Skipped says why); a
// deleted one is removed. Maps never hold nil.
type Config struct {
	Routes        map[string]*Route
	Upstreams     map[string]*Upstream
	Services      map[string]*Service
	Consumers     map[string]*Consumer
	GlobalRules   map[string]*GlobalRule
	PluginConfigs map[string]*PluginConfig
	SSLs          map[string]*SSL
	// ConsumerGroups are APISIX 3.x's consumer groups.
	ConsumerGroups map[string]*ConsumerGroup
	// Credentials are APISIX 3.x's consumer credentials, by their
	// KindConsumer entry id (CredentialKey).
	Credentials map[string]*Credential
	// PluginMetadata is each plugin's metadata by plugin name, validated,
	// with its schema's defaults filled in.
	PluginMetadata map[string]json.RawMessage
	// StreamRoutes are the stream proxy's routes.
	StreamRoutes map[string]*StreamRoute
	Revision     int64
	// invalid: "kind/id" → why its stored value was not loaded.
	invalid map[string]*SkipError
	// revisions: "kind/id" → the ModifiedIndex of the loaded value.
	revisions map[string]int64
}

// Reasons a stored resource is not served, the reason label of
// linkgate_gateway_skipped_resources.
const (
	SkipInvalid       = "invalid"           // fails APISIX's validation (or is not JSON)
	SkipUnknownPlugin = "unknown_plugin"    // uses a plugin linkgate does not have
	SkipUnsupported   = "unsupported"       // uses a feature linkgate does not have (Lua, ewma, discovery…)
	SkipMissingRef    = "missing_reference" // names a service, upstream or plugin config that is not loaded
	SkipPluginError   = "plugin_error"      // a plugin refused to build from a valid configuration
	SkipPanic         = "panic"             // loading it panicked (a bug, recovered)
)

// SkipError is a resource left out of the served configuration.
type SkipError struct {
	Key    string // "routes/1"
	Reason string // one of the Skip constants
	Err    error
}

func (e *SkipError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *SkipError) Unwrap() error { return e.Err }

func skipErr(key string, err error) *SkipError {
	reason := SkipInvalid
	var ve *ValidationError
	var pe *PanicError
	var be *buildError
	switch {
	case errors.As(err, &pe):
		reason = SkipPanic
	case errors.As(err, &be):
		reason = be.reason
	case errors.As(err, &ve) && ve.Reason != "":
		reason = ve.Reason
	}
	return &SkipError{Key: key, Reason: reason, Err: err}
}

// NewConfig returns an empty configuration.
func NewConfig() *Config {
	return &Config{
		Routes: map[string]*Route{}, Upstreams: map[string]*Upstream{}, Services: map[string]*Service{},
		Consumers: map[string]*Consumer{}, GlobalRules: map[string]*GlobalRule{}, PluginConfigs: map[string]*PluginConfig{},
		SSLs: map[string]*SSL{}, ConsumerGroups: map[string]*ConsumerGroup{}, Credentials: map[string]*Credential{}, PluginMetadata: map[string]json.RawMessage{}, StreamRoutes: map[string]*StreamRoute{}, invalid: map[string]*SkipError{}, revisions: map[string]int64{},
	}
}

// Clone returns a copy of c that Apply can change without changing c (the
// resources themselves are shared: they are never modified once decoded).
func (c *Config) Clone() *Config {
	return &Config{
		Routes: maps.Clone(c.Routes), Upstreams: maps.Clone(c.Upstreams), Services: maps.Clone(c.Services),
		Consumers: maps.Clone(c.Consumers), GlobalRules: maps.Clone(c.GlobalRules), PluginConfigs: maps.Clone(c.PluginConfigs),
		SSLs: maps.Clone(c.SSLs), ConsumerGroups: maps.Clone(c.ConsumerGroups), Credentials: maps.Clone(c.Credentials), PluginMetadata: maps.Clone(c.PluginMetadata), StreamRoutes: maps.Clone(c.StreamRoutes), Revision: c.Revision, invalid: maps.Clone(c.invalid), revisions: maps.Clone(c.revisions),
	}
}

// Skipped lists the stored resources whose values failed validation.
func (c *Config) Skipped() []*SkipError {
	out := make([]*SkipError, 0, len(c.invalid))
	for _, k := range sortedKeys(c.invalid) {
		out = append(out, c.invalid[k])
	}
	return out
}

// Apply folds a store Update into c. An entry that fails validation (say,
// an APISIX-written route using a feature linkgate lacks) is left out and
// reported, the rest loads; Skipped keeps the reasons until the entry
// changes or is deleted. Apply never panics: an entry whose decoding
// panics is skipped with SkipPanic.
func (c *Config) Apply(u Update, reg *Registry) []error {
	if u.Reset {
		*c = *NewConfig()
	}
	if c.invalid == nil {
		c.invalid = map[string]*SkipError{}
	}
	if c.revisions == nil {
		c.revisions = map[string]int64{}
	}
	var errs []error
	for _, e := range u.Entries {
		key := string(e.Kind) + "/" + e.ID
		c.remove(e.Kind, e.ID)
		if err := c.put(e, reg); err != nil {
			se := skipErr(key, err)
			c.invalid[key] = se
			errs = append(errs, se)
			continue
		}
		c.revisions[key] = e.ModifiedIndex
	}
	for _, e := range u.Deleted {
		c.remove(e.Kind, e.ID)
	}
	if u.Revision > c.Revision {
		c.Revision = u.Revision
	}
	return errs
}

// DecodeEntry validates a stored value and returns its decoded document.
func DecodeEntry(k Kind, value []byte, reg *Registry) (map[string]any, error) {
	doc, err := decodeObject(value)
	if err != nil {
		return nil, err
	}
	if err := Check(k, doc, reg, nil); err != nil {
		return nil, err
	}
	return doc, nil
}

// decodeObject decodes a stored value that must be a JSON object.
func decodeObject(value []byte) (map[string]any, error) {
	v, err := DecodeJSON(value)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("value is not a JSON object")
	}
	return doc, nil
}

func (c *Config) put(e Entry, reg *Registry) (err error) {
	defer recoverAs(&err)
	if _, _, ok := ParseCredentialKey(e.ID); ok && e.Kind == KindConsumer {
		return c.putCredential(e, reg)
	}
	if e.Kind == KindPluginMetadata {
		return c.putMetadata(e, reg)
	}
	doc, err := DecodeEntry(e.Kind, e.Value, reg)
	if err != nil {
		return err
	}
	switch e.Kind {
	case KindRoute:
		return store(c.Routes, e.ID, doc, func(r *Route) { r.ID = e.ID })
	case KindUpstream:
		return store(c.Upstreams, e.ID, doc, func(u *Upstream) { u.ID = e.ID })
	case KindService:
		return store(c.Services, e.ID, doc, func(s *Service) { s.ID = e.ID })
	case KindConsumer:
		return store(c.Consumers, e.ID, doc, func(*Consumer) {})
	case KindGlobalRule:
		return store(c.GlobalRules, e.ID, doc, func(g *GlobalRule) { g.ID = e.ID })
	case KindPluginConfig:
		return store(c.PluginConfigs, e.ID, doc, func(p *PluginConfig) { p.ID = e.ID })
	case KindConsumerGroup:
		return store(c.ConsumerGroups, e.ID, doc, func(g *ConsumerGroup) { g.ID = e.ID })
	case KindSSL:
		return c.putSSL(e.ID, doc, reg)
	case KindStreamRoute:
		return store(c.StreamRoutes, e.ID, doc, func(r *StreamRoute) { r.ID = e.ID })
	}
	return fmt.Errorf("unknown resource kind %q", e.Kind)
}

// putMetadata loads a plugin's metadata: the entry's id names the plugin
// (APISIX keys it so; the id in the value is not needed).
func (c *Config) putMetadata(e Entry, reg *Registry) error {
	doc, err := decodeObject(e.Value)
	if err != nil {
		return err
	}
	delete(doc, "id")
	if err := reg.CheckMetadata(e.ID, doc); err != nil {
		return err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	c.PluginMetadata[e.ID] = b
	return nil
}

func (c *Config) putCredential(e Entry, reg *Registry) error {
	doc, err := decodeObject(e.Value)
	if err != nil {
		return err
	}
	if err := CheckCredential(doc, reg); err != nil {
		return err
	}
	return store(c.Credentials, e.ID, doc, func(*Credential) {})
}

// store decodes doc into a T, sets its id and keeps it in m.
func store[T any](m map[string]*T, id string, doc map[string]any, setID func(*T)) error {
	v, err := Decode[T](doc)
	if err != nil {
		return err
	}
	setID(v)
	m[id] = v
	return nil
}

// remove deletes k/id from c, whether it was loaded or skipped.
func (c *Config) remove(k Kind, id string) {
	delete(c.invalid, string(k)+"/"+id)
	delete(c.revisions, string(k)+"/"+id)
	switch k {
	case KindRoute:
		delete(c.Routes, id)
	case KindUpstream:
		delete(c.Upstreams, id)
	case KindService:
		delete(c.Services, id)
	case KindConsumer:
		delete(c.Consumers, id)
		delete(c.Credentials, id)
	case KindGlobalRule:
		delete(c.GlobalRules, id)
	case KindPluginConfig:
		delete(c.PluginConfigs, id)
	case KindConsumerGroup:
		delete(c.ConsumerGroups, id)
	case KindSSL:
		delete(c.SSLs, id)
	case KindPluginMetadata:
		delete(c.PluginMetadata, id)
	case KindStreamRoute:
		delete(c.StreamRoutes, id)
	}
}

// source names a loaded resource and its revision: "routes/1@42".
func (c *Config) source(k Kind, id string) string {
	key := string(k) + "/" + id
	return key + "@" + strconv.FormatInt(c.revisions[key], 10)
}

// PanicError is a recovered panic, with the stack where it happened.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// recoverAs turns a panic into *err, a *PanicError (classified as
// SkipPanic). Use as: defer recoverAs(&err).
func recoverAs(err *error) {
	if p := recover(); p != nil {
		*err = &PanicError{Value: p, Stack: debug.Stack()}
	}
}

// RouteEntry is a route ready to serve: service, plugin config and upstream
// resolved, plugins instantiated and ordered.
type RouteEntry struct {
	ID, Name               string
	ServiceID, ServiceName string
	Paths                  []string
	Hosts                  []string
	Methods                []string
	RemoteAddrs            []netip.Prefix
	Vars                   *Expr
	Priority               int
	// Upstream is nil when neither the route nor its service has one.
	Upstream *Upstream
	// UpstreamKey names the upstream's runtime state (balancer, health,
	// connection pool): "upstreams/<id>" or the inline owner "routes/<id>".
	UpstreamKey string
	// Timeout is the route's timeout, else the upstream's, else nil.
	Timeout *Timeout
	Chain   Chain
	// WebSocket: clients may upgrade (enable_websocket of the route, else
	// of its service, or of its inline upstream as APISIX's init.lua).
	WebSocket bool
	// Fail, when not 0, is the status every request matching the route
	// gets: it names a resource that is not loaded (see missingRef).
	Fail int
	// ACME: the route asks for certificates for its hosts (ACMELabel).
	ACME bool
	// Sources are the stored resources the entry was compiled from, as
	// "kind/id@ModifiedIndex": the route, then its service, plugin config
	// and upstream.
	Sources []string
}

// ConsumerEntry is a consumer ready to serve.
type ConsumerEntry struct {
	Username string
	// CredentialID names the APISIX 3.x credential that identified the
	// consumer; "" when its own plugin configuration did.
	CredentialID string
	// CustomID is the consumer's custom_id label (APISIX 3.x sends it
	// upstream as X-Consumer-Custom-ID).
	CustomID string
	// GroupID is the consumer's group_id, "" when it has none
	// (consumer-restriction's consumer_group_id).
	GroupID string
	// Chain holds the consumer's plugins other than authentication; they
	// override the route's plugins of the same name.
	Chain Chain
	// auth: plugin name → what its AuthPreparer made of the consumer's conf.
	auth map[string]any
}

// AuthData is what an auth plugin's AuthPreparer made of this consumer's
// configuration of it, or nil.
func (c *ConsumerEntry) AuthData(plugin string) any { return c.auth[plugin] }

// Compiled is a configuration ready to serve. It is immutable once built.
type Compiled struct {
	Routes   []*RouteEntry
	Global   Chain
	Revision int64
	// Upstreams by id, for plugins that choose one (traffic-split).
	Upstreams map[string]*Upstream
	// credentials: plugin name → credential → consumer.
	credentials map[string]map[string]*ConsumerEntry
	// shared: the plugin metadata, global rules and consumers served, as Sources.
	shared []string
	// SSLs are the enabled ssl resources, for the TLS listener.
	SSLs []*SSLEntry
	// StreamRoutes are the stream proxy's routes, by id.
	StreamRoutes []*StreamRouteEntry
	// ModifiedIndexes is, per kind, the highest modifiedIndex of the
	// stored entries (APISIX's apisix_etcd_modify_indexes); set by the
	// Reloader.
	ModifiedIndexes map[Kind]int64
}

// LookupConsumer finds the consumer owning credential for an auth plugin.
func (c *Compiled) LookupConsumer(plugin, credential string) *ConsumerEntry {
	return c.credentials[plugin][credential]
}

// Compile resolves references and instantiates plugins. A route, global
// rule or consumer whose references cannot be resolved or whose plugins
// fail to build is left out and reported (*SkipError); the rest is
// served. Compile never panics: a resource whose compilation panics is
// left out with SkipPanic.
func Compile(cfg *Config, reg *Registry) (*Compiled, []error) {
	out := &Compiled{Revision: cfg.Revision, Upstreams: maps.Clone(cfg.Upstreams), credentials: map[string]map[string]*ConsumerEntry{}}
	var errs []error
	skip := func(key string, err error) { errs = append(errs, skipErr(key, err)) }
	reg = reg.withMetadata(cfg.PluginMetadata)
	for _, name := range sortedKeys(cfg.PluginMetadata) {
		out.shared = append(out.shared, cfg.source(KindPluginMetadata, name))
	}
	for _, id := range sortedKeys(cfg.SSLs) {
		if s := cfg.SSLs[id]; s != nil && s.Enabled() && s.entry != nil {
			out.SSLs = append(out.SSLs, s.entry)
		}
	}
	for _, id := range sortedKeys(cfg.GlobalRules) {
		ch, err := compileGlobalRule(reg, id, cfg.GlobalRules[id])
		if err != nil {
			skip("global_rules/"+id, err)
			continue
		}
		out.shared = append(out.shared, cfg.source(KindGlobalRule, id))
		out.Global = append(out.Global, ch...)
	}
	sortChain(out.Global)
	byConsumer := map[string]*ConsumerEntry{}
	for _, name := range sortedKeys(cfg.Consumers) {
		ce, creds, err := compileConsumer(cfg, reg, name, cfg.Consumers[name])
		if err != nil {
			skip("consumers/"+name, err)
			continue
		}
		out.shared = append(out.shared, cfg.source(KindConsumer, name))
		if g := cfg.Consumers[name].GroupID; g != "" {
			out.shared = append(out.shared, cfg.source(KindConsumerGroup, string(g)))
		}
		for pname, cred := range creds {
			if out.credentials[pname] == nil {
				out.credentials[pname] = map[string]*ConsumerEntry{}
			}
			out.credentials[pname][cred] = ce
		}
		byConsumer[name] = ce
	}
	// APISIX 3.x's credentials: each identifies its consumer (the same
	// plugins run) through its own auth plugin configuration.
	for _, key := range sortedKeys(cfg.Credentials) {
		name, credID, _ := ParseCredentialKey(key)
		owner := byConsumer[name]
		if owner == nil {
			skip("consumers/"+key, missingRef(0, "consumer %s not found", name))
			continue
		}
		ce, creds, err := compileCredential(reg, owner, credID, cfg.Credentials[key])
		if err != nil {
			skip("consumers/"+key, err)
			continue
		}
		out.shared = append(out.shared, cfg.source(KindConsumer, key))
		for pname, cred := range creds {
			if out.credentials[pname] == nil {
				out.credentials[pname] = map[string]*ConsumerEntry{}
			}
			out.credentials[pname][cred] = ce
		}
	}
	for _, id := range sortedKeys(cfg.Routes) {
		r := cfg.Routes[id]
		if r != nil && r.Status == 0 {
			continue
		}
		e, err := compileRoute(cfg, reg, r)
		if err != nil {
			skip("routes/"+id, err)
			var be *buildError
			if errors.As(err, &be) && be.status != 0 && e != nil {
				e.Fail, e.Chain, e.Upstream = be.status, nil, nil
				out.Routes = append(out.Routes, e) // matches, and answers be.status
			}
			continue
		}
		out.Routes = append(out.Routes, e)
	}
	for _, id := range sortedKeys(cfg.StreamRoutes) {
		e, err := compileStreamRoute(cfg, cfg.StreamRoutes[id])
		if err != nil {
			skip(string(KindStreamRoute)+"/"+id, err)
			continue
		}
		out.StreamRoutes = append(out.StreamRoutes, e)
	}
	return out, errs
}

// buildError carries the skip reason of a compile failure and, for a
// route that names a missing resource, the status it answers with.
type buildError struct {
	reason string
	err    error
	status int
}

func (e *buildError) Error() string { return e.err.Error() }
func (e *buildError) Unwrap() error { return e.err }

// missingRef is a route naming a resource that is not loaded: like
// APISIX, the route still matches and answers status (503 for a plugin
// config, 404 for a service, 502 for an upstream).
func missingRef(status int, format string, args ...any) error {
	return &buildError{reason: SkipMissingRef, err: fmt.Errorf(format, args...), status: status}
}

var errNoValue = errors.New("no value")

func compileGlobalRule(reg *Registry, id string, g *GlobalRule) (ch Chain, err error) {
	defer recoverAs(&err)
	if g == nil {
		return nil, errNoValue
	}
	return reg.Build(g.Plugins, Scope{KindGlobalRule, id})
}

// compileConsumer builds a consumer's plugin chain and reads its
// credentials (auth plugin name → credential).
func compileConsumer(cfg *Config, reg *Registry, name string, cons *Consumer) (ce *ConsumerEntry, creds map[string]string, err error) {
	defer recoverAs(&err)
	if cons == nil {
		return nil, nil, errNoValue
	}
	ce = &ConsumerEntry{Username: cons.Username, CustomID: cons.Labels["custom_id"], GroupID: string(cons.GroupID)}
	creds = map[string]string{}
	rest := Plugins{}
	for _, pname := range sortedKeys(cons.Plugins) {
		conf := cons.Plugins[pname]
		f, ok := reg.Get(pname)
		if !ok {
			return nil, nil, &buildError{reason: SkipUnknownPlugin, err: fmt.Errorf("unknown plugin [%s]", pname)}
		}
		if _, ok := f.(Authenticator); ok {
			if err := ce.addAuth(reg, f, pname, conf, creds); err != nil {
				return nil, nil, err
			}
			continue
		}
		rest[pname] = conf
	}
	ch, err := reg.Build(rest, Scope{KindConsumer, name})
	if err != nil {
		return nil, nil, err
	}
	if cons.GroupID != "" {
		// APISIX 3.x: the group's plugins, under the group's scope (its
		// counters are the group's), unless the consumer configures the
		// plugin itself. A consumer whose group is missing is not served.
		g := cfg.ConsumerGroups[string(cons.GroupID)]
		if g == nil {
			return nil, nil, missingRef(0, "consumer group %s not found", cons.GroupID)
		}
		gch, err := reg.Build(g.Plugins, Scope{KindConsumerGroup, g.ID})
		if err != nil {
			return nil, nil, err
		}
		for _, in := range gch {
			f, _ := reg.Get(in.Name)
			if _, auth := f.(Authenticator); auth {
				continue // a group identifies no one: its consumers' own auth plugins do
			}
			if _, own := cons.Plugins[in.Name]; !own {
				ch = append(ch, in)
			}
		}
		sortChain(ch)
	}
	ce.Chain = ch
	return ce, creds, nil
}

// addAuth reads an auth plugin's configuration of the consumer: the
// credential it is identified by (into creds) and what the plugin
// prepares of it (AuthData).
func (ce *ConsumerEntry) addAuth(reg *Registry, f Factory, pname string, conf json.RawMessage, creds map[string]string) error {
	a := f.(Authenticator)
	if reg.secrets != nil {
		var err error
		if conf, err = resolveSecrets(conf, reg.secrets); err != nil {
			return &buildError{reason: SkipPluginError, err: fmt.Errorf("plugin %s: %w", pname, err)}
		}
	}
	cred, err := a.Credential(conf)
	if err != nil {
		return &buildError{reason: SkipPluginError, err: fmt.Errorf("plugin %s: %w", pname, err)}
	}
	if p, ok := f.(AuthPreparer); ok {
		data, err := p.PrepareConsumer(conf)
		if err != nil {
			return &buildError{reason: SkipPluginError, err: fmt.Errorf("plugin %s: %w", pname, err)}
		}
		if ce.auth == nil {
			ce.auth = map[string]any{}
		}
		ce.auth[pname] = data
	}
	creds[pname] = cred
	return nil
}

// compileCredential is owner identified by a credential: its chain, with
// the credential's auth plugin configuration in place of the consumer's
// (APISIX's construct_consumer_data clones the consumer).
func compileCredential(reg *Registry, owner *ConsumerEntry, id string, cr *Credential) (ce *ConsumerEntry, creds map[string]string, err error) {
	defer recoverAs(&err)
	if cr == nil {
		return nil, nil, errNoValue
	}
	ce = &ConsumerEntry{Username: owner.Username, CredentialID: id, CustomID: owner.CustomID, GroupID: owner.GroupID, Chain: owner.Chain}
	creds = map[string]string{}
	for _, pname := range sortedKeys(cr.Plugins) {
		f, ok := reg.Get(pname)
		if !ok {
			return nil, nil, &buildError{reason: SkipUnknownPlugin, err: fmt.Errorf("unknown plugin [%s]", pname)}
		}
		if _, ok := f.(Authenticator); !ok {
			return nil, nil, invalidf("only supports auth type plugins in consumer credential")
		}
		if err := ce.addAuth(reg, f, pname, cr.Plugins[pname], creds); err != nil {
			return nil, nil, err
		}
	}
	return ce, creds, nil
}

func compileRoute(cfg *Config, reg *Registry, r *Route) (e *RouteEntry, err error) {
	defer recoverAs(&err)
	if r == nil {
		return nil, errNoValue
	}
	e = &RouteEntry{ID: r.ID, Name: r.Name, Paths: r.Paths(), Hosts: r.AllHosts(), Priority: r.Priority, Timeout: r.Timeout,
		Sources: []string{cfg.source(KindRoute, r.ID)}, ACME: r.Labels[ACMELabel] == "true"}
	for _, m := range r.Methods {
		e.Methods = append(e.Methods, strings.ToUpper(m))
	}
	addrs := r.RemoteAddrs
	if r.RemoteAddr != "" {
		addrs = []string{r.RemoteAddr}
	}
	for _, a := range addrs {
		p, err := ParseAddrOrPrefix(a)
		if err != nil {
			return nil, err
		}
		e.RemoteAddrs = append(e.RemoteAddrs, p)
	}
	if len(r.Vars) > 0 {
		raw, _ := json.Marshal(r.Vars)
		v, err := DecodeJSON(raw)
		if err != nil {
			return nil, err
		}
		expr, err := ParseVars(v.([]any))
		if err != nil {
			return nil, err
		}
		e.Vars = expr
	}
	if r.PluginConfigID != "" && cfg.PluginConfigs[string(r.PluginConfigID)] == nil {
		return e, missingRef(503, "plugin config %s not found", r.PluginConfigID)
	}
	var chain Chain
	var svc *Service
	if r.ServiceID != "" {
		svc = cfg.Services[string(r.ServiceID)]
		if svc == nil {
			return e, missingRef(404, "service %s not found", r.ServiceID)
		}
		e.ServiceID, e.ServiceName = svc.ID, svc.Name
		e.Sources = append(e.Sources, cfg.source(KindService, svc.ID))
		if len(e.Hosts) == 0 {
			e.Hosts = svc.Hosts
		}
	}
	// Plugins: the service's, overridden by the route's, overridden by the plugin config's.
	type layer struct {
		plugins Plugins
		scope   Scope
	}
	var layers []layer
	if svc != nil {
		layers = append(layers, layer{svc.Plugins, Scope{KindService, svc.ID}})
	}
	layers = append(layers, layer{r.Plugins, Scope{KindRoute, r.ID}})
	if r.PluginConfigID != "" {
		pc := cfg.PluginConfigs[string(r.PluginConfigID)]
		if pc == nil {
			return e, missingRef(503, "plugin config %s not found", r.PluginConfigID)
		}
		layers = append(layers, layer{pc.Plugins, Scope{KindPluginConfig, pc.ID}})
		e.Sources = append(e.Sources, cfg.source(KindPluginConfig, pc.ID))
	}
	for i, l := range layers {
		own := Plugins{}
		for name, conf := range l.plugins {
			overridden := false
			for _, later := range layers[i+1:] {
				if _, ok := later.plugins[name]; ok {
					overridden = true
				}
			}
			if !overridden {
				own[name] = conf
			}
		}
		ch, err := reg.Build(own, l.scope)
		if err != nil {
			return nil, err
		}
		chain = append(chain, ch...)
	}
	sortChain(chain)
	e.Chain = chain

	switch {
	case r.UpstreamID != "":
		u := cfg.Upstreams[string(r.UpstreamID)]
		if u == nil {
			return e, missingRef(502, "upstream %s not found", r.UpstreamID)
		}
		e.Upstream, e.UpstreamKey = u, "upstreams/"+u.ID
		e.Sources = append(e.Sources, cfg.source(KindUpstream, u.ID))
	case r.Upstream != nil:
		e.Upstream, e.UpstreamKey = r.Upstream, "routes/"+r.ID
	case svc != nil && svc.UpstreamID != "":
		u := cfg.Upstreams[string(svc.UpstreamID)]
		if u == nil {
			return e, missingRef(502, "upstream %s not found", svc.UpstreamID)
		}
		e.Upstream, e.UpstreamKey = u, "upstreams/"+u.ID
		e.Sources = append(e.Sources, cfg.source(KindUpstream, u.ID))
	case svc != nil && svc.Upstream != nil:
		e.Upstream, e.UpstreamKey = svc.Upstream, "services/"+svc.ID
	}
	if e.Upstream != nil && L4Scheme(e.Upstream.Scheme) {
		return e, &buildError{reason: SkipUnsupported, status: 502,
			err: fmt.Errorf("upstream scheme %s is for stream routes, not HTTP ones", e.Upstream.Scheme)}
	}
	if e.Timeout == nil && e.Upstream != nil {
		e.Timeout = e.Upstream.Timeout
	}
	ws := r.EnableWebsocket
	if ws == nil && svc != nil {
		ws = svc.EnableWebsocket
	}
	e.WebSocket = ws != nil && *ws || r.Upstream != nil && r.Upstream.EnableWebsocket
	return e, nil
}

func sortChain(c Chain) {
	slices.SortStableFunc(c, func(a, b Instance) int { return b.Priority - a.Priority })
}
