package gateway

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// The schemas below follow APISIX 2.14's apisix/schema_def.lua.

var (
	idSchema = &Schema{AnyOf: []*Schema{
		{Type: "string", MinLength: 1, MaxLength: 64, Pattern: regexp.MustCompile(`^[a-zA-Z0-9-_.]+$`)},
		{Type: "integer", Minimum: Num(1)},
	}}
	hostDef      = &Schema{Type: "string", Pattern: regexp.MustCompile(`^\*?[0-9a-zA-Z-._\[\]:]+$`)}
	nameDef      = &Schema{Type: "string", MinLength: 1, MaxLength: 100}
	descDef      = &Schema{Type: "string", MaxLength: 256}
	timestampDef = &Schema{Type: "integer"}
	labelsDef    = &Schema{Type: "object", Values: &Schema{Type: "string", MinLength: 1, MaxLength: 64, Pattern: regexp.MustCompile(`^\S+$`)}}
	pluginsDef   = &Schema{Type: "object"}
	ipDef        = &Schema{Type: "string", Pattern: ipOrCIDR}
	ipOrCIDR     = regexp.MustCompile(`^[0-9a-fA-F:.]+(/[0-9]{1,3})?$`)
	timeoutDef   = &Schema{Type: "object", Required: []string{"connect", "send", "read"}, Properties: map[string]*Schema{
		"connect": {Type: "number", Minimum: Num(0), ExclusiveMin: true},
		"send":    {Type: "number", Minimum: Num(0), ExclusiveMin: true},
		"read":    {Type: "number", Minimum: Num(0), ExclusiveMin: true},
	}}
	statusList = func(def []any) *Schema {
		return &Schema{Type: "array", MinItems: 1, UniqueItems: true, Default: def,
			Items: &Schema{Type: "integer", Minimum: Num(200), Maximum: Num(599)}}
	}
	intDef = func(min float64, def int) *Schema { return &Schema{Type: "integer", Minimum: Num(min), Default: def} }

	healthChecksDef = &Schema{Type: "object", Properties: map[string]*Schema{
		"active": {Type: "object", Properties: map[string]*Schema{
			"type":                     {Type: "string", Enum: []any{"http", "https", "tcp"}, Default: "http"},
			"timeout":                  {Type: "number", Default: 1},
			"concurrency":              {Type: "integer", Default: 10},
			"host":                     hostDef,
			"port":                     {Type: "integer", Minimum: Num(1), Maximum: Num(65535)},
			"http_path":                {Type: "string", Default: "/"},
			"https_verify_certificate": {Type: "boolean", Default: true},
			"req_headers":              {Type: "array", MinItems: 1, UniqueItems: true, Items: &Schema{Type: "string"}},
			"healthy": {Type: "object", Default: map[string]any{}, Properties: map[string]*Schema{
				"interval":      intDef(1, 1),
				"http_statuses": statusList([]any{200, 302}),
				"successes":     {Type: "integer", Minimum: Num(1), Maximum: Num(254), Default: 2},
			}},
			"unhealthy": {Type: "object", Default: map[string]any{}, Properties: map[string]*Schema{
				"interval":      intDef(1, 1),
				"http_statuses": statusList([]any{429, 404, 500, 501, 502, 503, 504, 505}),
				"http_failures": {Type: "integer", Minimum: Num(1), Maximum: Num(254), Default: 5},
				"tcp_failures":  {Type: "integer", Minimum: Num(1), Maximum: Num(254), Default: 2},
				"timeouts":      {Type: "integer", Minimum: Num(1), Maximum: Num(254), Default: 3},
			}},
		}},
		"passive": {Type: "object", Properties: map[string]*Schema{
			"type": {Type: "string", Enum: []any{"http", "https", "tcp"}, Default: "http"},
			"healthy": {Type: "object", Default: map[string]any{}, Properties: map[string]*Schema{
				"http_statuses": statusList([]any{200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 306, 307, 308}),
				"successes":     {Type: "integer", Minimum: Num(0), Maximum: Num(254), Default: 5},
			}},
			"unhealthy": {Type: "object", Default: map[string]any{}, Properties: map[string]*Schema{
				"http_statuses": statusList([]any{429, 500, 503}),
				"tcp_failures":  {Type: "integer", Minimum: Num(0), Maximum: Num(254), Default: 2},
				"timeouts":      {Type: "integer", Minimum: Num(0), Maximum: Num(254), Default: 7},
				"http_failures": {Type: "integer", Minimum: Num(0), Maximum: Num(254), Default: 5},
			}},
		}},
	}, AnyOf: []*Schema{{Required: []string{"active"}}, {Required: []string{"active", "passive"}}}}

	nodesDef = &Schema{AnyOf: []*Schema{
		{Type: "object", Values: &Schema{Type: "integer", Minimum: Num(0)}},
		{Type: "array", Items: &Schema{Type: "object", Required: []string{"host", "port", "weight"}, Properties: map[string]*Schema{
			"host":     hostDef,
			"port":     {Type: "integer", Minimum: Num(1)},
			"weight":   {Type: "integer", Minimum: Num(0)},
			"priority": {Type: "integer", Default: 0},
			"metadata": {Type: "object"},
		}}},
	}}

	upstreamSchema = &Schema{Type: "object", NoAdditional: true, Properties: map[string]*Schema{
		"id":            idSchema,
		"nodes":         nodesDef,
		"retries":       {Type: "integer", Minimum: Num(0)},
		"retry_timeout": {Type: "number", Minimum: Num(0)},
		"timeout":       timeoutDef,
		"tls": {Type: "object", Required: []string{"client_cert", "client_key"}, Properties: map[string]*Schema{
			"client_cert": {Type: "string"}, "client_key": {Type: "string"},
		}},
		"keepalive_pool": {Type: "object", Properties: map[string]*Schema{
			"size":         {Type: "integer", Minimum: Num(1), Default: 320},
			"idle_timeout": {Type: "number", Minimum: Num(0), Default: 60},
			"requests":     {Type: "integer", Minimum: Num(1), Default: 1000},
		}},
		"type":           {Type: "string", Enum: []any{"chash", "roundrobin", "ewma", "least_conn"}},
		"checks":         healthChecksDef,
		"hash_on":        {Type: "string", Enum: []any{"vars", "header", "cookie", "consumer", "vars_combinations"}, Default: "vars"},
		"key":            {Type: "string"},
		"scheme":         {Type: "string", Enum: []any{"grpc", "grpcs", "http", "https"}, Default: "http"},
		"labels":         labelsDef,
		"discovery_type": {Type: "string"},
		"discovery_args": {Type: "object"},
		"pass_host":      {Type: "string", Enum: []any{"pass", "node", "rewrite"}, Default: "pass"},
		"upstream_host":  hostDef,
		"name":           nameDef,
		"desc":           descDef,
		"service_name":   {Type: "string", MinLength: 1, MaxLength: 256},
		"create_time":    timestampDef,
		"update_time":    timestampDef,
	}, OneOf: []*Schema{
		{Required: []string{"type", "nodes"}},
		{Required: []string{"type", "service_name", "discovery_type"}},
	}}

	methodsEnum = []any{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PURGE"}

	routeSchema = &Schema{Type: "object", NoAdditional: true, Properties: map[string]*Schema{
		"uri":              {Type: "string", MinLength: 1, MaxLength: 4096},
		"uris":             {Type: "array", MinItems: 1, UniqueItems: true, Items: &Schema{Type: "string"}},
		"name":             nameDef,
		"desc":             descDef,
		"priority":         {Type: "integer", Default: 0},
		"methods":          {Type: "array", UniqueItems: true, Items: &Schema{Type: "string", Enum: methodsEnum}},
		"host":             hostDef,
		"hosts":            {Type: "array", MinItems: 1, UniqueItems: true, Items: hostDef},
		"remote_addr":      ipDef,
		"remote_addrs":     {Type: "array", MinItems: 1, UniqueItems: true, Items: ipDef},
		"vars":             {Type: "array"},
		"filter_func":      {Type: "string", MinLength: 10, Pattern: regexp.MustCompile(`^function`)},
		"plugins":          pluginsDef,
		"script":           {Type: "string", MinLength: 10, MaxLength: 102400},
		"upstream":         upstreamSchema,
		"labels":           labelsDef,
		"service_id":       idSchema,
		"upstream_id":      idSchema,
		"plugin_config_id": idSchema,
		"id":               idSchema,
		"enable_websocket": {Type: "boolean"},
		"status":           {Type: "integer", Enum: []any{1, 0}, Default: 1},
		"timeout":          timeoutDef,
		"create_time":      timestampDef,
		"update_time":      timestampDef,
		"service_protocol": {Type: "string"},
	}, AnyOf: []*Schema{{Required: []string{"uri"}}, {Required: []string{"uris"}}}}

	serviceSchema = &Schema{Type: "object", NoAdditional: true, Properties: map[string]*Schema{
		"id":               idSchema,
		"plugins":          pluginsDef,
		"upstream":         upstreamSchema,
		"upstream_id":      idSchema,
		"name":             nameDef,
		"desc":             descDef,
		"labels":           labelsDef,
		"enable_websocket": {Type: "boolean"},
		"hosts":            {Type: "array", MinItems: 1, UniqueItems: true, Items: hostDef},
		"script":           {Type: "string", MinLength: 10, MaxLength: 102400},
		"create_time":      timestampDef,
		"update_time":      timestampDef,
	}}

	consumerSchema = &Schema{Type: "object", NoAdditional: true, Required: []string{"username"}, Properties: map[string]*Schema{
		"username":    {Type: "string", MinLength: 1, MaxLength: 100, Pattern: regexp.MustCompile(`^[a-zA-Z0-9_]+$`)},
		"desc":        descDef,
		"plugins":     pluginsDef,
		"labels":      labelsDef,
		"create_time": timestampDef,
		"update_time": timestampDef,
	}}

	globalRuleSchema = &Schema{Type: "object", NoAdditional: true, Required: []string{"plugins"}, Properties: map[string]*Schema{
		"id":          idSchema,
		"plugins":     pluginsDef,
		"create_time": timestampDef,
		"update_time": timestampDef,
	}}

	pluginConfigSchema = &Schema{Type: "object", NoAdditional: true, Required: []string{"id", "plugins"}, Properties: map[string]*Schema{
		"id":          idSchema,
		"desc":        descDef,
		"plugins":     pluginsDef,
		"labels":      labelsDef,
		"create_time": timestampDef,
		"update_time": timestampDef,
	}}
)

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

// Check validates doc, a decoded resource of kind k, as APISIX's admin API
// does before storing it: the schema (filling defaults in), the rules the
// schema cannot say, and every plugin's own schema through reg. References
// to other resources are checked by the admin API, which can read the store.
func Check(k Kind, doc map[string]any, reg *Registry) error {
	if err := SchemaOf(k).Validate(doc); err != nil {
		return invalidf("invalid configuration: %v", err)
	}
	switch k {
	case KindRoute:
		if err := checkRoute(doc); err != nil {
			return err
		}
	case KindService:
		if err := checkUpstreamIn(doc); err != nil {
			return err
		}
	case KindUpstream:
		if err := checkUpstream(doc); err != nil {
			return err
		}
	}
	if p, ok := doc["plugins"].(map[string]any); ok {
		if err := reg.Check(p, k == KindConsumer); err != nil {
			return err
		}
	}
	return nil
}

func checkRoute(doc map[string]any) error {
	for _, pair := range [][2]string{{"host", "hosts"}, {"remote_addr", "remote_addrs"}, {"uri", "uris"}} {
		_, a := doc[pair[0]]
		_, b := doc[pair[1]]
		if a && b {
			return invalidf("only one of %s or %s is allowed", pair[0], pair[1])
		}
	}
	var addrs []any
	if s, ok := doc["remote_addr"]; ok {
		addrs = append(addrs, s)
	}
	if l, ok := doc["remote_addrs"].([]any); ok {
		addrs = append(addrs, l...)
	}
	for _, a := range addrs {
		if _, err := ParseAddrOrPrefix(a.(string)); err != nil {
			return invalidf("invalid configuration: invalid remote address %q", a)
		}
	}
	if _, ok := doc["filter_func"]; ok {
		return unsupportedf("invalid configuration: filter_func (Lua) is not supported by linkgate")
	}
	if _, ok := doc["script"]; ok {
		return unsupportedf("invalid configuration: script (Lua) is not supported by linkgate")
	}
	if v, ok := doc["vars"].([]any); ok {
		if _, err := ParseVars(v); err != nil {
			return invalidf("failed to validate the 'vars' expression: %v", err)
		}
	}
	return checkUpstreamIn(doc)
}

func checkUpstreamIn(doc map[string]any) error {
	if u, ok := doc["upstream"].(map[string]any); ok {
		return checkUpstream(u)
	}
	return nil
}

var varsKey = regexp.MustCompile(`^(uri|server_name|server_addr|request_uri|remote_port|remote_addr|query_string|host|hostname|arg_[0-9a-zA-Z_-]+)$`)

func checkUpstream(u map[string]any) error {
	typ, _ := u["type"].(string)
	hashOn, _ := u["hash_on"].(string)
	key, _ := u["key"].(string)
	if typ == "chash" {
		if hashOn != "consumer" && key == "" {
			return invalidf("missing key")
		}
		if hashOn == "vars" && !varsKey.MatchString(key) {
			return invalidf("invalid configuration: failed to match pattern %q with %q", varsKey.String(), key)
		}
	}
	if typ == "ewma" {
		return unsupportedf("invalid configuration: upstream type ewma is not supported by linkgate")
	}
	if _, ok := u["service_name"]; ok {
		return unsupportedf("invalid configuration: service discovery is not supported by linkgate")
	}
	if s, _ := u["scheme"].(string); s == "grpc" || s == "grpcs" {
		return unsupportedf("invalid configuration: scheme %s is not supported by linkgate", s)
	}
	switch u["pass_host"] {
	case "rewrite":
		if _, ok := u["upstream_host"]; !ok {
			return invalidf("invalid configuration: property \"upstream_host\" is required when \"pass_host\" is \"rewrite\"")
		}
	case "node":
		if n := countNodes(u["nodes"]); n > 1 {
			return invalidf("only support single node for `node` mode currently")
		}
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

func countNodes(v any) int {
	switch x := v.(type) {
	case map[string]any:
		return len(x)
	case []any:
		return len(x)
	}
	return 0
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
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
