package gateway

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// The schemas below are APISIX 2.14.1's (apisix/schema_def.lua): the same
// keywords, so the same documents pass and fail with the same messages,
// and the schema API serves them. Like APISIX 2.14 they allow properties
// they do not name (unknown fields are stored as given).

var (
	idSchema = &Schema{AnyOf: []*Schema{
		{Type: "string", MinLength: 1, MaxLength: 64, Pattern: regexp.MustCompile(`^[a-zA-Z0-9-_.]+$`)},
		{Type: "integer", Minimum: Num(1)},
	}}
	hostDefPattern = `^\*?[0-9a-zA-Z-._\[\]:]+$`
	hostDef        = &Schema{Type: "string", Pattern: regexp.MustCompile(hostDefPattern)}
	ipv4Def        = `([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\.([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\.` +
		`([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\.([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])`
	ipv6Def = `([a-fA-F0-9]{0,4}:){1,8}(:[a-fA-F0-9]{0,4}){0,8}([a-fA-F0-9]{0,4})?`
	ipDef   = []*Schema{
		{Type: "string", Format: "ipv4"},
		{Type: "string", Pattern: regexp.MustCompile(`^` + ipv4Def + `/([12]?[0-9]|3[0-2])$`)},
		{Type: "string", Format: "ipv6"},
		{Type: "string", Pattern: regexp.MustCompile(`^` + ipv6Def + `/[0-9]{1,3}$`)},
	}
	remoteAddrDef = &Schema{Type: "string", AnyOf: ipDef, Description: "client IP"}
	timestampDef  = &Schema{Type: "integer"}
	labelsDef     = &Schema{Type: "object", Description: "key/value pairs to specify attributes",
		Values: &Schema{Type: "string", MinLength: 1, MaxLength: 64, Pattern: regexp.MustCompile(`^\S+$`), Description: "value of label"}}
	nameDef    = &Schema{Type: "string", MinLength: 1, MaxLength: 100}
	descDef    = &Schema{Type: "string", MaxLength: 256}
	pluginsDef = &Schema{Type: "object"}
	timeoutDef = &Schema{Type: "object", Required: []string{"connect", "send", "read"}, Properties: map[string]*Schema{
		"connect": {Type: "number", Minimum: Num(0), ExclusiveMin: true},
		"send":    {Type: "number", Minimum: Num(0), ExclusiveMin: true},
		"read":    {Type: "number", Minimum: Num(0), ExclusiveMin: true},
	}}
	statusList = func(def []any) *Schema {
		return &Schema{Type: "array", MinItems: 1, UniqueItems: true, Default: def,
			Items: &Schema{Type: "integer", Minimum: Num(200), Maximum: Num(599)}}
	}
	intRange = func(min, max float64, def int) *Schema {
		return &Schema{Type: "integer", Minimum: Num(min), Maximum: Num(max), Default: def}
	}

	healthChecksDef = &Schema{Type: "object", Properties: map[string]*Schema{
		"active": {Type: "object", Properties: map[string]*Schema{
			"type":                     {Type: "string", Enum: []any{"http", "https", "tcp"}, Default: "http"},
			"timeout":                  {Type: "number", Default: 1},
			"concurrency":              {Type: "integer", Default: 10},
			"host":                     hostDef,
			"port":                     {Type: "integer", Minimum: Num(1), Maximum: Num(65535)},
			"http_path":                {Type: "string", Default: "/"},
			"https_verify_certificate": {Type: "boolean", Default: true},
			"healthy": {Type: "object", Properties: map[string]*Schema{
				"interval":      {Type: "integer", Minimum: Num(1), Default: 1},
				"http_statuses": statusList([]any{200, 302}),
				"successes":     intRange(1, 254, 2),
			}},
			"unhealthy": {Type: "object", Properties: map[string]*Schema{
				"interval":      {Type: "integer", Minimum: Num(1), Default: 1},
				"http_statuses": statusList([]any{429, 404, 500, 501, 502, 503, 504, 505}),
				"http_failures": intRange(1, 254, 5),
				"tcp_failures":  intRange(1, 254, 2),
				"timeouts":      intRange(1, 254, 3),
			}},
			"req_headers": {Type: "array", MinItems: 1, Items: &Schema{Type: "string", UniqueItems: true}},
		}},
		"passive": {Type: "object", Properties: map[string]*Schema{
			"type": {Type: "string", Enum: []any{"http", "https", "tcp"}, Default: "http"},
			"healthy": {Type: "object", Properties: map[string]*Schema{
				"http_statuses": statusList([]any{200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 306, 307, 308}),
				"successes":     intRange(0, 254, 5),
			}},
			"unhealthy": {Type: "object", Properties: map[string]*Schema{
				"http_statuses": statusList([]any{429, 500, 503}),
				"tcp_failures":  intRange(0, 254, 2),
				"timeouts":      intRange(0, 254, 7),
				"http_failures": intRange(0, 254, 5),
			}},
		}, Default: map[string]any{
			"type": "http",
			"healthy": map[string]any{"http_statuses": []any{200, 201, 202, 203, 204, 205, 206, 207, 208, 226,
				300, 301, 302, 303, 304, 305, 306, 307, 308}, "successes": 0},
			"unhealthy": map[string]any{"http_statuses": []any{429, 500, 503}, "tcp_failures": 0, "timeouts": 0, "http_failures": 0},
		}},
	}, AnyOf: []*Schema{{Required: []string{"active"}}, {Required: []string{"active", "passive"}}}}

	// nodesDef is 3.x's: a node of the array form may leave its port out
	// (its host may be host:port; else the scheme's port), where 2.14
	// required it.
	nodesDef = &Schema{AnyOf: []*Schema{
		{Type: "object", Values: &Schema{Type: "integer", Minimum: Num(0), Description: "weight of node"}},
		{Type: "array", Items: &Schema{Type: "object", Required: []string{"host", "weight"}, Properties: map[string]*Schema{
			"host":     hostDef,
			"port":     {Type: "integer", Minimum: Num(1), Maximum: Num(65535), Description: "port of node"},
			"weight":   {Type: "integer", Minimum: Num(0), Description: "weight of node"},
			"priority": {Type: "integer", Default: 0, Description: "priority of node"},
			"metadata": {Type: "object", Description: "metadata of node"},
		}}},
	}}

	certificateDef = &Schema{Type: "string", MinLength: 128, MaxLength: 64 * 1024}

	upstreamSchema = &Schema{Type: "object", Properties: map[string]*Schema{
		"create_time":   timestampDef,
		"update_time":   timestampDef,
		"nodes":         nodesDef,
		"retries":       {Type: "integer", Minimum: Num(0)},
		"retry_timeout": {Type: "number", Minimum: Num(0)},
		"timeout":       timeoutDef,
		"tls": {Type: "object", Required: []string{"client_cert", "client_key"}, Properties: map[string]*Schema{
			"client_cert": certificateDef, "client_key": certificateDef,
		}},
		"keepalive_pool": {Type: "object", Properties: map[string]*Schema{
			"size":         {Type: "integer", Minimum: Num(1), Default: 320},
			"idle_timeout": {Type: "number", Minimum: Num(0), Default: 60},
			"requests":     {Type: "integer", Minimum: Num(1), Default: 1000},
		}},
		"type":           {Type: "string", Description: "algorithms of load balancing", Default: "roundrobin"}, // optional since 3.0
		"checks":         healthChecksDef,
		"hash_on":        {Type: "string", Enum: []any{"vars", "header", "cookie", "consumer", "vars_combinations"}, Default: "vars"},
		"key":            {Type: "string", Description: "the key of chash for dynamic load balancing"},
		"scheme":         {Enum: []any{"grpc", "grpcs", "http", "https", "tcp", "tls", "udp", "kafka"}, Default: "http"},
		"labels":         labelsDef,
		"discovery_type": {Type: "string", Description: "discovery type"},
		"discovery_args": {Type: "object", Properties: map[string]*Schema{
			"namespace_id": {Type: "string"}, "group_name": {Type: "string"},
		}},
		"pass_host":     {Type: "string", Enum: []any{"pass", "node", "rewrite"}, Default: "pass", Description: "mod of host passing"},
		"upstream_host": hostDef,
		"name":          nameDef,
		"desc":          descDef,
		"service_name":  {Type: "string", MinLength: 1, MaxLength: 256},
		"id":            idSchema,
	}, OneOf: []*Schema{
		{Required: []string{"nodes"}}, // 3.0 dropped "type"
		{Required: []string{"service_name", "discovery_type"}},
	}}

	// The chash key's schemas by hash_on (apisix/schema_def.lua, with its
	// a-zA-z as written there).
	hashVarsSchema   = &Schema{Type: "string", Pattern: regexp.MustCompile(`^((uri|server_name|server_addr|request_uri|remote_port|remote_addr|query_string|host|hostname)|arg_[0-9a-zA-z_-]+)$`)}
	hashHeaderSchema = &Schema{Type: "string", Pattern: regexp.MustCompile(`^[a-zA-Z0-9-_]+$`)}

	methodSchema = &Schema{Type: "string", Description: "HTTP method",
		Enum: []any{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PURGE"}}

	requiredOf = func(sets ...[]string) []*Schema {
		out := make([]*Schema, len(sets))
		for i, r := range sets {
			out[i] = &Schema{Required: r}
		}
		return out
	}
	exclusive = func(a, b string) *Schema {
		return &Schema{OneOf: []*Schema{{Not: &Schema{AnyOf: requiredOf([]string{a}, []string{b})}},
			{Required: []string{a}}, {Required: []string{b}}}}
	}

	routeSchema = &Schema{Type: "object", Properties: map[string]*Schema{
		"create_time":      timestampDef,
		"update_time":      timestampDef,
		"uri":              {Type: "string", MinLength: 1, MaxLength: 4096},
		"uris":             {Type: "array", MinItems: 1, UniqueItems: true, Items: &Schema{Type: "string", Description: "HTTP uri"}},
		"name":             nameDef,
		"desc":             descDef,
		"priority":         {Type: "integer", Default: 0},
		"methods":          {Type: "array", UniqueItems: true, Items: methodSchema},
		"host":             hostDef,
		"hosts":            {Type: "array", MinItems: 1, UniqueItems: true, Items: hostDef},
		"remote_addr":      remoteAddrDef,
		"remote_addrs":     {Type: "array", MinItems: 1, UniqueItems: true, Items: remoteAddrDef},
		"timeout":          timeoutDef,
		"vars":             {Type: "array"},
		"filter_func":      {Type: "string", MinLength: 10, Pattern: regexp.MustCompile(`^function`)},
		"script":           {Type: "string", MinLength: 10, MaxLength: 102400},
		"script_id":        idSchema,
		"plugins":          pluginsDef,
		"plugin_config_id": idSchema,
		"upstream":         upstreamSchema,
		"labels":           labelsDef,
		"service_id":       idSchema,
		"upstream_id":      idSchema,
		"service_protocol": {Enum: []any{"grpc", "http"}},
		"enable_websocket": {Type: "boolean", Description: "enable websocket for request"},
		"id":               idSchema,
		"status":           {Type: "integer", Enum: []any{1, 0}, Default: 1, Description: "route status, 1 to enable, 0 to disable"},
	}, AllOf: []*Schema{
		{OneOf: requiredOf([]string{"uri"}, []string{"uris"})},
		exclusive("host", "hosts"),
		exclusive("remote_addr", "remote_addrs"),
	}, AnyOf: requiredOf(
		[]string{"plugins", "uri"}, []string{"upstream", "uri"}, []string{"upstream_id", "uri"}, []string{"service_id", "uri"},
		[]string{"plugins", "uris"}, []string{"upstream", "uris"}, []string{"upstream_id", "uris"}, []string{"service_id", "uris"},
		[]string{"script", "uri"}, []string{"script", "uris"},
	), Not: &Schema{AnyOf: requiredOf([]string{"script", "plugins"}, []string{"script", "plugin_config_id"})}}

	serviceSchema = &Schema{Type: "object", Properties: map[string]*Schema{
		"id":               idSchema,
		"plugins":          pluginsDef,
		"upstream":         upstreamSchema,
		"upstream_id":      idSchema,
		"name":             nameDef,
		"desc":             descDef,
		"labels":           labelsDef,
		"script":           {Type: "string", MinLength: 10, MaxLength: 102400},
		"create_time":      timestampDef,
		"update_time":      timestampDef,
		"enable_websocket": {Type: "boolean", Description: "enable websocket for request"},
		"hosts":            {Type: "array", MinItems: 1, UniqueItems: true, Items: hostDef},
	}}

	// consumerGroupSchema is APISIX 3.x's consumer_group.
	consumerGroupSchema = &Schema{Type: "object", Required: []string{"id", "plugins"}, NoAdditional: true, Properties: map[string]*Schema{
		"id":          idSchema,
		"name":        nameDef,
		"desc":        descDef,
		"labels":      labelsDef,
		"create_time": timestampDef,
		"update_time": timestampDef,
		"plugins":     pluginsDef,
	}}

	consumerSchema = &Schema{Type: "object", Required: []string{"username"}, Properties: map[string]*Schema{
		"group_id":    idSchema,                                                                                         // 3.x
		"username":    {Type: "string", MinLength: 1, MaxLength: 100, Pattern: regexp.MustCompile(`^[a-zA-Z0-9_\-]+$`)}, // 3.x's: '-' allowed
		"plugins":     pluginsDef,
		"labels":      labelsDef,
		"create_time": timestampDef,
		"update_time": timestampDef,
		"desc":        descDef,
	}}

	// credentialSchema is APISIX 3.x's credential: one auth plugin's
	// configuration for a consumer, stored under the consumer's key.
	credentialSchema = &Schema{Type: "object", NoAdditional: true, Properties: map[string]*Schema{
		"id": {OneOf: []*Schema{idSchema,
			{Type: "string", MinLength: 15, MaxLength: 128, Pattern: regexp.MustCompile(`^[a-zA-Z0-9-_]+/credentials/[a-zA-Z0-9-_.]+$`)}}},
		"name":        nameDef,
		"desc":        descDef,
		"labels":      labelsDef,
		"create_time": timestampDef,
		"update_time": timestampDef,
		"plugins":     {Type: "object", MaxProperties: 1},
	}}

	globalRuleSchema = &Schema{Type: "object", Required: []string{"plugins"}, Properties: map[string]*Schema{
		"id":          idSchema,
		"plugins":     pluginsDef,
		"create_time": timestampDef,
		"update_time": timestampDef,
	}}

	pluginConfigSchema = &Schema{Type: "object", Required: []string{"id", "plugins"}, Properties: map[string]*Schema{
		"id":          idSchema,
		"desc":        descDef,
		"plugins":     pluginsDef,
		"labels":      labelsDef,
		"create_time": timestampDef,
		"update_time": timestampDef,
	}}

	// Resources linkgate does not serve, for the schema API only.
	sslSchema = &Schema{Type: "object", Properties: map[string]*Schema{
		"id":    idSchema,
		"cert":  certificateDef,
		"key":   certificateDef,
		"sni":   {Type: "string", Pattern: regexp.MustCompile(hostDefPattern)},
		"snis":  {Type: "array", MinItems: 1, Items: &Schema{Type: "string", Pattern: regexp.MustCompile(hostDefPattern)}},
		"certs": {Type: "array", Items: certificateDef},
		"keys":  {Type: "array", Items: certificateDef},
		"client": {Type: "object", Required: []string{"ca"}, Properties: map[string]*Schema{
			"ca": certificateDef, "depth": {Type: "integer", Minimum: Num(0), Default: 1},
		}},
		"exptime":        {Type: "integer", Minimum: Num(1588262400)},
		"labels":         labelsDef,
		"status":         {Type: "integer", Enum: []any{1, 0}, Default: 1, Description: "ssl status, 1 to enable, 0 to disable"},
		"validity_end":   timestampDef,
		"validity_start": timestampDef,
		"create_time":    timestampDef,
		"update_time":    timestampDef,
	}, OneOf: requiredOf([]string{"sni", "key", "cert"}, []string{"snis", "key", "cert"})}
	protoSchema = &Schema{Type: "object", Required: []string{"content"}, Properties: map[string]*Schema{
		"id": idSchema, "desc": descDef, "create_time": timestampDef, "update_time": timestampDef,
		"content": {Type: "string", MinLength: 1, MaxLength: 1024 * 1024},
	}}
	// streamRouteSchema is APISIX 3.x's stream_route.
	streamRouteSchema = &Schema{Type: "object", NoAdditional: true, Properties: map[string]*Schema{
		"id": idSchema, "name": nameDef, "desc": descDef, "labels": labelsDef, "create_time": timestampDef, "update_time": timestampDef,
		"remote_addr": remoteAddrDef,
		"server_addr": {Type: "string", AnyOf: ipDef, Description: "server IP"},
		"server_port": {Type: "integer", Minimum: Num(1), Maximum: Num(65535), Description: "server port"},
		"sni":         {Type: "string", Pattern: regexp.MustCompile(hostDefPattern), Description: "server name indication"},
		"upstream":    upstreamSchema,
		"upstream_id": idSchema,
		"service_id":  idSchema,
		"plugins":     pluginsDef,
		"protocol": {Type: "object", Properties: map[string]*Schema{
			"name": {Type: "string"}, "superior_id": idSchema, "conf": {Type: "object"}, "logger": {Type: "array"},
		}, Required: []string{"name"}},
	}}
	pluginsListSchema = &Schema{Type: "array", Items: &Schema{Type: "object", Required: []string{"name"}, Properties: map[string]*Schema{
		"name": {Type: "string", MinLength: 1}, "stream": {Type: "boolean"},
	}}}
)

// NamedSchema returns a schema of APISIX's core.schema by its name, as
// GET /apisix/admin/schema/{name} serves it.
func NamedSchema(name string) (*Schema, bool) {
	s, ok := map[string]*Schema{
		"route": routeSchema, "service": serviceSchema, "upstream": upstreamSchema, "consumer": consumerSchema,
		"global_rule": globalRuleSchema, "plugin_config": pluginConfigSchema, "consumer_group": consumerGroupSchema, "ssl": sslSchema, "proto": protoSchema,
		"credential": credentialSchema, "stream_route": streamRouteSchema, "plugins": pluginsListSchema, "id_schema": idSchema, "host_def": hostDef,
		"method_schema": methodSchema, "upstream_hash_vars_schema": hashVarsSchema, "upstream_hash_header_schema": hashHeaderSchema,
		"upstream_hash_vars_combinations_schema": {Type: "string"}, "label_value_def": labelsDef.Values,
	}[name]
	return s, ok
}

// SchemaOf returns the schema of a resource kind.
func SchemaOf(k Kind) *Schema {
	switch k {
	case KindRoute:
		return routeSchema
	case KindUpstream:
		return upstreamSchema
	case KindService:
		return serviceSchema
	case KindConsumer:
		return consumerSchema
	case KindGlobalRule:
		return globalRuleSchema
	case KindPluginConfig:
		return pluginConfigSchema
	case KindSSL:
		return sslSchema
	case KindConsumerGroup:
		return consumerGroupSchema
	case KindStreamRoute:
		return streamRouteSchema
	}
	return nil
}

// ValidationError is a configuration rejected with APISIX's message; the
// admin API answers it with 400 {"error_msg": Msg}. Reason classifies it
// for linkgate_gateway_skipped_resources when the resource came from a
// store: SkipInvalid, SkipUnknownPlugin or SkipUnsupported.
type ValidationError struct{ Msg, Reason string }

func (e *ValidationError) Error() string { return e.Msg }

func invalidf(format string, args ...any) error {
	return &ValidationError{Msg: fmt.Sprintf(format, args...), Reason: SkipInvalid}
}

// unsupportedf rejects a valid APISIX configuration using a feature
// linkgate does not have.
func unsupportedf(format string, args ...any) error {
	return &ValidationError{Msg: fmt.Sprintf(format, args...), Reason: SkipUnsupported}
}

// RefChecker reports whether a resource a document names (upstream_id,
// service_id, plugin_config_id) exists; the admin API checks against its
// store. A nil RefChecker checks no references (they are resolved when the
// configuration is compiled).
type RefChecker func(k Kind, id string) error

// ErrRefMissing is what a RefChecker returns for a resource that does not exist.
var ErrRefMissing = errors.New("not found")

// Check validates doc, a decoded resource of kind k, as APISIX 2.14's admin
// API does before storing it (the check_conf of apisix/admin/<kind>.lua,
// in its order): the schema (filling defaults in), the rules the schema
// cannot say, the references (through refs), every plugin's own schema
// through reg, and route vars. The id checks (path against body) are the
// admin API's.
func Check(k Kind, doc map[string]any, reg *Registry, refs RefChecker) error {
	switch k {
	case KindRoute:
		return checkRoute(doc, reg, refs)
	case KindService:
		return checkService(doc, reg, refs)
	case KindUpstream:
		return checkUpstream(doc, true)
	case KindStreamRoute:
		return checkStreamRoute(doc, refs)
	case KindConsumer:
		if err := schemaCheck(consumerSchema, doc); err != nil {
			return err
		}
		if err := checkConsumerPlugins(doc, reg); err != nil {
			return err
		}
		return checkRefs(doc, refs, "group_id")
	case KindGlobalRule, KindPluginConfig, KindConsumerGroup:
		if err := schemaCheck(SchemaOf(k), doc); err != nil {
			return err
		}
		return checkPlugins(doc, reg)
	case KindSSL:
		return checkSSL(doc, reg.SSLKeys())
	case KindPluginMetadata:
		// The id is the plugin's name (the admin API sets it); the
		// metadata schema sees the rest, as APISIX checks it before
		// adding the id.
		name, _ := doc["id"].(string)
		id, hasID := doc["id"]
		delete(doc, "id")
		err := reg.CheckMetadata(name, doc)
		if hasID {
			doc["id"] = id
		}
		return err
	}
	return invalidf("unknown resource kind %q", k)
}

// CheckCredential validates a consumer's credential as APISIX 3.x's
// apisix/admin/credentials.lua does: its schema, then its one plugin by
// the plugin's consumer schema, which must be an auth plugin's.
func CheckCredential(doc map[string]any, reg *Registry) error {
	if err := schemaCheck(credentialSchema, doc); err != nil {
		return err
	}
	if err := checkConsumerPlugins(doc, reg); err != nil {
		return err
	}
	p, _ := doc["plugins"].(map[string]any)
	for name := range p {
		f, _ := reg.Get(name)
		if _, auth := f.(Authenticator); !auth {
			return invalidf("only supports auth type plugins in consumer credential")
		}
	}
	return nil
}

func schemaCheck(s *Schema, doc map[string]any) error {
	if err := s.Validate(doc); err != nil {
		return invalidf("invalid configuration: %v", err)
	}
	return nil
}

func checkPlugins(doc map[string]any, reg *Registry) error {
	if p, ok := doc["plugins"].(map[string]any); ok {
		return reg.Check(p, false)
	}
	return nil
}

// checkConsumerPlugins is apisix/admin/consumers.lua's plugin check: auth
// plugins by their consumer schema.
func checkConsumerPlugins(doc map[string]any, reg *Registry) error {
	p, ok := doc["plugins"].(map[string]any)
	if !ok {
		return nil
	}
	if err := reg.Check(p, true); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return &ValidationError{Msg: "invalid plugins configuration: " + ve.Msg, Reason: ve.Reason}
		}
		return err
	}
	return nil
}

// RequireAuthPlugin is APISIX 2.14's rule that a consumer with plugins
// has an auth plugin among them (3.x dropped it: credentials identify a
// consumer too).
func RequireAuthPlugin(doc map[string]any, reg *Registry) error {
	p, ok := doc["plugins"].(map[string]any)
	if !ok {
		return nil
	}
	for name := range p {
		if f, ok := reg.Get(name); ok {
			if _, auth := f.(Authenticator); auth {
				return nil
			}
		}
	}
	return invalidf("require one auth plugin")
}

func checkRefs(doc map[string]any, refs RefChecker, fields ...string) error {
	if refs == nil {
		return nil
	}
	for _, field := range fields {
		v, ok := doc[field]
		if !ok {
			continue
		}
		id, _ := IDString(v)
		kind, what := KindUpstream, "upstream"
		switch field {
		case "service_id":
			kind, what = KindService, "service"
		case "plugin_config_id":
			kind, what = KindPluginConfig, "plugin config"
		case "group_id":
			kind, what = KindConsumerGroup, "consumer group"
		}
		if err := refs(kind, id); err != nil {
			if errors.Is(err, ErrRefMissing) {
				return invalidf("failed to fetch %s info by %s id [%s], response code: 404", what, what, id)
			}
			return invalidf("failed to fetch %s info by %s id [%s]: %v", what, what, id, err)
		}
	}
	return nil
}

func checkRoute(doc map[string]any, reg *Registry, refs RefChecker) error {
	for _, pair := range [][2]string{{"host", "hosts"}, {"remote_addr", "remote_addrs"}} {
		_, a := doc[pair[0]]
		_, b := doc[pair[1]]
		if a && b {
			if pair[0] == "host" {
				return invalidf("only one of host or hosts is allowed")
			}
			return invalidf("only one of remote_addr or remote_addrs is allowed")
		}
	}
	if err := schemaCheck(routeSchema, doc); err != nil {
		return err
	}
	if err := checkUpstreamIn(doc); err != nil {
		return err
	}
	if err := checkRefs(doc, refs, "upstream_id", "service_id", "plugin_config_id"); err != nil {
		return err
	}
	if err := checkPlugins(doc, reg); err != nil {
		return err
	}
	if v, ok := doc["vars"].([]any); ok {
		if _, err := ParseVars(v); err != nil {
			return invalidf("failed to validate the 'vars' expression: %v", err)
		}
	}
	if _, ok := doc["filter_func"]; ok {
		return unsupportedf("invalid configuration: filter_func (Lua) is not supported by linkgate")
	}
	if _, ok := doc["script"]; ok {
		return unsupportedf("invalid configuration: script (Lua) is not supported by linkgate")
	}
	return nil
}

func checkService(doc map[string]any, reg *Registry, refs RefChecker) error {
	if err := schemaCheck(serviceSchema, doc); err != nil {
		return err
	}
	if err := checkUpstreamIn(doc); err != nil {
		return err
	}
	if err := checkRefs(doc, refs, "upstream_id"); err != nil {
		return err
	}
	if err := checkPlugins(doc, reg); err != nil {
		return err
	}
	if _, ok := doc["script"]; ok {
		return unsupportedf("invalid configuration: script (Lua) is not supported by linkgate")
	}
	return nil
}

func checkUpstreamIn(doc map[string]any) error {
	if u, ok := doc["upstream"].(map[string]any); ok {
		return checkUpstream(u, false)
	}
	return nil
}

// streamPlugins are APISIX 3.x's stream plugins: a stream route naming
// one is valid in APISIX but not served by linkgate, which has none.
var streamPlugins = []string{"ip-restriction", "limit-conn", "mqtt-proxy", "prometheus", "syslog", "traffic-split"}

// checkStreamRoute is apisix/admin/stream_routes.lua's check_conf: the
// schema, the references, then the stream router's checker (plugins
// among the stream ones, addresses that parse); an inline upstream gets
// the schema only, as there. Then what linkgate cannot serve.
func checkStreamRoute(doc map[string]any, refs RefChecker) error {
	if err := schemaCheck(streamRouteSchema, doc); err != nil {
		return err
	}
	if err := checkRefs(doc, refs, "upstream_id", "service_id"); err != nil {
		return err
	}
	if p, ok := doc["plugins"].(map[string]any); ok && len(p) > 0 {
		name := sortedKeys(p)[0]
		if !slices.Contains(streamPlugins, name) {
			return invalidf("unknown plugin [%s]", name)
		}
		return unsupportedf("stream plugin %s is not supported by linkgate", name)
	}
	for _, field := range []string{"remote_addr", "server_addr"} {
		if s, ok := doc[field].(string); ok {
			if _, err := ParseAddrOrPrefix(s); err != nil {
				return invalidf("invalid %s: %s", field, s)
			}
		}
	}
	if _, ok := doc["protocol"]; ok {
		return unsupportedf("invalid configuration: xRPC protocols are not supported by linkgate")
	}
	if u, ok := doc["upstream"].(map[string]any); ok {
		return streamUpstream(u)
	}
	return nil
}

// streamUpstream refuses what the stream proxy cannot do with an upstream.
func streamUpstream(u map[string]any) error {
	switch typ, _ := u["type"].(string); typ {
	case "roundrobin", "chash":
	default:
		return unsupportedf("invalid configuration: the stream proxy balances roundrobin and chash, not %q", typ)
	}
	if _, ok := u["service_name"]; ok {
		return unsupportedf("invalid configuration: service discovery is not supported by linkgate")
	}
	if s, _ := u["scheme"].(string); s == "udp" || s == "kafka" || s == "grpc" || s == "grpcs" {
		return unsupportedf("invalid configuration: scheme %s is not supported by the stream proxy", s)
	}
	return nil
}

// checkUpstream is apisix/upstream.lua's check_upstream_conf, then what
// linkgate cannot serve. l4 allows the stream schemes (tcp, tls): an
// upstream resource may serve stream routes, an HTTP route's inline one
// may not.
func checkUpstream(u map[string]any, l4 bool) error {
	nodes, _ := u["nodes"].([]any)
	for _, n := range nodes {
		node, _ := n.(map[string]any)
		host, _ := node["host"].(string)
		if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() {
			return invalidf("invalid configuration: IPv6 address must be enclosed with '[' and ']'") // 3.x
		}
	}
	if err := schemaCheck(upstreamSchema, u); err != nil {
		return err
	}
	if u["pass_host"] == "rewrite" {
		if h, _ := u["upstream_host"].(string); h == "" {
			return invalidf("`upstream_host` can't be empty when `pass_host` is `rewrite`")
		}
	}
	if tls, ok := u["tls"].(map[string]any); ok {
		if err := validateCertKey(tls["client_cert"].(string), tls["client_key"].(string)); err != nil {
			return invalidf("%v", err)
		}
	}
	if typ, _ := u["type"].(string); typ == "chash" {
		hashOn, _ := u["hash_on"].(string)
		key, hasKey := u["key"]
		if hashOn != "consumer" && !hasKey {
			return invalidf("missing key")
		}
		var ks *Schema
		switch hashOn {
		case "vars":
			ks = hashVarsSchema
		case "header", "cookie":
			ks = hashHeaderSchema
		case "vars_combinations":
			ks = &Schema{Type: "string"}
		}
		if ks != nil {
			if err := ks.Validate(key); err != nil {
				return invalidf("invalid configuration: %v", err)
			}
		}
	}
	switch typ, _ := u["type"].(string); typ {
	case "roundrobin", "chash", "least_conn":
	case "ewma":
		return unsupportedf("invalid configuration: upstream type ewma is not supported by linkgate")
	default:
		return unsupportedf("invalid configuration: unknown upstream type %q (linkgate balances roundrobin, chash and least_conn)", typ)
	}
	if _, ok := u["service_name"]; ok {
		return unsupportedf("invalid configuration: service discovery is not supported by linkgate")
	}
	if s, _ := u["scheme"].(string); s != "http" && s != "https" && !(l4 && L4Scheme(s)) {
		return unsupportedf("invalid configuration: scheme %s is not supported by linkgate", s)
	}
	if m, ok := u["nodes"].(map[string]any); ok {
		for k := range m {
			if _, _, err := SplitHostPort(k); err != nil {
				return invalidf("invalid configuration: %v", err)
			}
		}
	}
	return nil
}

// validateCertKey is apisix/ssl.lua's validate: both parse as PEM.
func validateCertKey(cert, key string) error {
	b, _ := pem.Decode([]byte(cert))
	if b == nil {
		return fmt.Errorf("failed to parse cert: PEM_read_bio_X509_AUX() failed")
	}
	if _, err := x509.ParseCertificate(b.Bytes); err != nil {
		return fmt.Errorf("failed to parse cert: %v", err)
	}
	if k, _ := pem.Decode([]byte(key)); k == nil {
		return fmt.Errorf("failed to parse key: PEM_read_bio_PrivateKey() failed")
	}
	return nil
}

// ParseAddrOrPrefix parses an IP or a CIDR into a prefix (an IP is /32 or /128).
func ParseAddrOrPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Decode turns a validated document into the typed resource T.
func Decode[T any](doc any) (*T, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var v T
	if err := Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
