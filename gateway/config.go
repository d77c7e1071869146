// Package gateway is linkgate's APISIX-compatible API gateway domain: the
// resources the admin API stores (routes, upstreams, services, consumers,
// global rules, plugin configs), their validation against APISIX 2.14's
// schemas, the plugin contract, the config store contract and the
// compilation of a set of resources into what the data plane serves.
//
// It imports only the standard library; the engine (gateway/proxy), stores
// (gateway/bolt, gateway/etcd) and plugins (gateway/plugin/...) depend on it.
package gateway

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Kind names a resource type, as in the admin API path and the etcd key.
type Kind string

// The resources linkgate serves.
const (
	KindRoute        Kind = "routes"
	KindUpstream     Kind = "upstreams"
	KindService      Kind = "services"
	KindConsumer     Kind = "consumers"
	KindGlobalRule   Kind = "global_rules"
	KindPluginConfig Kind = "plugin_configs"
	KindSSL          Kind = "ssl" // APISIX 2.14's path and etcd key
	// KindConsumerGroup is APISIX 3.x's: plugins shared by the consumers
	// that name it in group_id.
	KindConsumerGroup Kind = "consumer_groups"
	// KindPluginMetadata is APISIX's plugin metadata: one configuration per
	// plugin, shared by all its instances; the id is the plugin's name.
	KindPluginMetadata Kind = "plugin_metadata"
	// KindStreamRoute is an L4 (TCP/TLS) route of the stream proxy.
	KindStreamRoute Kind = "stream_routes"
)

// Kinds lists every resource kind in dependency order: what a route refers
// to comes before it.
var Kinds = []Kind{KindPluginMetadata, KindSSL, KindUpstream, KindService, KindPluginConfig, KindConsumerGroup, KindConsumer, KindGlobalRule, KindRoute, KindStreamRoute}

// Singular is the word APISIX uses in messages ("wrong route id").
func (k Kind) Singular() string {
	switch k {
	case KindGlobalRule:
		return "global rule"
	case KindPluginConfig:
		return "plugin config"
	case KindConsumerGroup:
		return "consumer group"
	case KindStreamRoute:
		return "stream route"
	}
	return strings.TrimSuffix(string(k), "s")
}

// ParseKind returns the Kind named s.
func ParseKind(s string) (Kind, bool) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, true
		}
	}
	return "", false
}

// Plugins maps a plugin name to its configuration, as stored.
type Plugins map[string]json.RawMessage

// Timeout is APISIX's {connect, send, read} in seconds.
type Timeout struct {
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Read    float64 `json:"read"`
}

// Route is one APISIX route.
type Route struct {
	ID             string            `json:"-"`
	URI            string            `json:"uri"`
	URIs           []string          `json:"uris"`
	Name           string            `json:"name"`
	Priority       int               `json:"priority"`
	Methods        []string          `json:"methods"`
	Host           string            `json:"host"`
	Hosts          []string          `json:"hosts"`
	RemoteAddr     string            `json:"remote_addr"`
	RemoteAddrs    []string          `json:"remote_addrs"`
	Vars           []json.RawMessage `json:"vars"`
	Plugins        Plugins           `json:"plugins"`
	Upstream       *Upstream         `json:"upstream"`
	UpstreamID     FlexID            `json:"upstream_id"`
	ServiceID      FlexID            `json:"service_id"`
	PluginConfigID FlexID            `json:"plugin_config_id"`
	Timeout        *Timeout          `json:"timeout"`
	Status         int               `json:"status"`
	// EnableWebsocket lets clients upgrade to WebSocket (nil: the
	// service's setting).
	EnableWebsocket *bool `json:"enable_websocket"`
	// Labels are APISIX's free key/value pairs; linkgate reads one,
	// ACMELabel.
	Labels map[string]string `json:"labels"`
}

// ACMELabel is the route label that asks for automatic HTTPS (linkgate
// gateway --acme): with the value "true", the route's hosts get
// certificates by ACME. A label, not a new field, so that APISIX accepts
// the same route.
const ACMELabel = "acme"

// Paths returns the route's uri or uris.
func (r *Route) Paths() []string {
	if r.URI != "" {
		return []string{r.URI}
	}
	return r.URIs
}

// AllHosts returns the route's host or hosts.
func (r *Route) AllHosts() []string {
	if r.Host != "" {
		return []string{r.Host}
	}
	return r.Hosts
}

// Upstream is a set of nodes and how to balance and reach them.
type Upstream struct {
	ID           string   `json:"-"`
	Type         string   `json:"type"`
	Nodes        Nodes    `json:"nodes"`
	Retries      *int     `json:"retries"`
	RetryTimeout float64  `json:"retry_timeout"`
	Timeout      *Timeout `json:"timeout"`
	HashOn       string   `json:"hash_on"`
	Key          string   `json:"key"`
	Scheme       string   `json:"scheme"`
	PassHost     string   `json:"pass_host"`
	UpstreamHost string   `json:"upstream_host"`
	Checks       *Checks  `json:"checks"`
	// EnableWebsocket is APISIX's legacy upstream switch (not in its 2.14
	// schema, still read by its init.lua): true in a route's inline
	// upstream lets the route upgrade.
	EnableWebsocket bool `json:"enable_websocket"`
	Keepalive       *struct {
		Size        int     `json:"size"`
		IdleTimeout float64 `json:"idle_timeout"`
		Requests    int     `json:"requests"`
	} `json:"keepalive_pool"`
}

// Node is one upstream server.
type Node struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Weight   int    `json:"weight"`
	Priority int    `json:"priority"`
}

// Addr is host:port.
func (n Node) Addr() string { return net.JoinHostPort(n.Host, strconv.Itoa(n.Port)) }

// Nodes accepts APISIX's two forms: {"host:port": weight} or [{host, port, weight}].
type Nodes []Node

// UnmarshalJSON reads either form. A node without a port gets the one of
// its host:port (APISIX 3.x's array nodes may leave port out), else 0: the
// upstream's scheme decides it later (80 or 443).
func (ns *Nodes) UnmarshalJSON(b []byte) error {
	var list []Node
	if err := json.Unmarshal(b, &list); err == nil {
		for i, n := range list {
			if n.Port != 0 {
				// "[::1]" as an array node's host: brackets off, as its
				// map form's.
				if h := n.Host; len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
					list[i].Host = h[1 : len(h)-1]
				}
				continue
			}
			if host, port, err := SplitHostPort(n.Host); err == nil {
				list[i].Host, list[i].Port = host, port
			}
		}
		*ns = list
		return nil
	}
	var m map[string]int
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	out := make(Nodes, 0, len(m))
	for _, k := range sortedKeys(m) {
		host, port, err := SplitHostPort(k)
		if err != nil {
			return err
		}
		out = append(out, Node{Host: host, Port: port, Weight: m[k]})
	}
	*ns = out
	return nil
}

// SplitHostPort splits "host[:port]" (IPv6 in brackets); port 0 if absent.
// An address of two colons or more without brackets is an IPv6 address
// without a port, as APISIX's core.utils.parse_addr takes it ("::1:1980"
// is host ::1:1980).
func SplitHostPort(s string) (string, int, error) {
	if s != "" && s[0] != '[' && strings.Count(s, ":") >= 2 {
		return s, 0, nil
	}
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return strings.Trim(s, "[]"), 0, nil
		}
		return "", 0, fmt.Errorf("invalid node address %q", s)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("invalid port in node address %q", s)
	}
	return host, port, nil
}

// Checks is an upstream's health checking.
type Checks struct {
	Active  *ActiveCheck  `json:"active"`
	Passive *PassiveCheck `json:"passive"`
}

// ActiveCheck probes every node periodically.
type ActiveCheck struct {
	Type                   string   `json:"type"`
	Timeout                float64  `json:"timeout"`
	Concurrency            int      `json:"concurrency"`
	HTTPPath               string   `json:"http_path"`
	Host                   string   `json:"host"`
	Port                   int      `json:"port"`
	HTTPSVerifyCertificate bool     `json:"https_verify_certificate"`
	ReqHeaders             []string `json:"req_headers"`
	Healthy                struct {
		Interval     float64 `json:"interval"`
		HTTPStatuses []int   `json:"http_statuses"`
		Successes    int     `json:"successes"`
	} `json:"healthy"`
	Unhealthy struct {
		Interval     float64 `json:"interval"`
		HTTPStatuses []int   `json:"http_statuses"`
		HTTPFailures int     `json:"http_failures"`
		TCPFailures  int     `json:"tcp_failures"`
		Timeouts     int     `json:"timeouts"`
	} `json:"unhealthy"`
}

// UnmarshalJSON fills in what lua-resty-healthcheck assumes when the
// stored configuration leaves it out (APISIX stores no defaults for
// healthy and unhealthy when they are absent).
func (a *ActiveCheck) UnmarshalJSON(b []byte) error {
	type plain ActiveCheck
	p := plain{Type: "http", Timeout: 1, Concurrency: 10, HTTPPath: "/", HTTPSVerifyCertificate: true}
	p.Healthy.Interval, p.Healthy.HTTPStatuses, p.Healthy.Successes = 1, []int{200, 302}, 2
	p.Unhealthy.Interval, p.Unhealthy.HTTPStatuses = 1, []int{429, 404, 500, 501, 502, 503, 504, 505}
	p.Unhealthy.HTTPFailures, p.Unhealthy.TCPFailures, p.Unhealthy.Timeouts = 5, 2, 3
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*a = ActiveCheck(p)
	return nil
}

// UnmarshalJSON fills in the passive check's defaults, as for ActiveCheck.
func (p *PassiveCheck) UnmarshalJSON(b []byte) error {
	type plain PassiveCheck
	q := plain{Type: "http"}
	q.Healthy.HTTPStatuses = []int{200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 306, 307, 308}
	q.Healthy.Successes = 5
	q.Unhealthy.HTTPStatuses, q.Unhealthy.TCPFailures, q.Unhealthy.Timeouts, q.Unhealthy.HTTPFailures = []int{429, 500, 503}, 2, 7, 5
	if err := json.Unmarshal(b, &q); err != nil {
		return err
	}
	*p = PassiveCheck(q)
	return nil
}

// PassiveCheck judges nodes by the proxied traffic.
type PassiveCheck struct {
	Type    string `json:"type"`
	Healthy struct {
		HTTPStatuses []int `json:"http_statuses"`
		Successes    int   `json:"successes"`
	} `json:"healthy"`
	Unhealthy struct {
		HTTPStatuses []int `json:"http_statuses"`
		HTTPFailures int   `json:"http_failures"`
		TCPFailures  int   `json:"tcp_failures"`
		Timeouts     int   `json:"timeouts"`
	} `json:"unhealthy"`
}

// Service groups the plugins, upstream and hosts routes may share.
type Service struct {
	ID         string    `json:"-"`
	Name       string    `json:"name"`
	Plugins    Plugins   `json:"plugins"`
	Upstream   *Upstream `json:"upstream"`
	UpstreamID FlexID    `json:"upstream_id"`
	Hosts      []string  `json:"hosts"`
	// EnableWebsocket applies to its routes that do not say.
	EnableWebsocket *bool `json:"enable_websocket"`
}

// Consumer is an API user; authentication plugins map credentials to it.
type Consumer struct {
	Username string            `json:"username"`
	Plugins  Plugins           `json:"plugins"`
	GroupID  FlexID            `json:"group_id"`
	Labels   map[string]string `json:"labels"`
}

// Credential is APISIX 3.x's credential: another way (one auth plugin's
// configuration) to identify a consumer, stored in the consumers
// directory under CredentialKey.
type Credential struct {
	Plugins Plugins `json:"plugins"`
}

// CredentialKey is the id, among KindConsumer entries, of the consumer's
// credential: "jack/credentials/a" (APISIX's etcd key
// /apisix/consumers/jack/credentials/a, and its standalone id).
func CredentialKey(consumer, credential string) string {
	return consumer + "/credentials/" + credential
}

// ParseCredentialKey splits a KindConsumer entry id that names a
// credential; ok is false for a consumer's own id.
func ParseCredentialKey(id string) (consumer, credential string, ok bool) {
	consumer, credential, ok = strings.Cut(id, "/credentials/")
	if !ok || consumer == "" || credential == "" || strings.Contains(consumer, "/") || strings.Contains(credential, "/") {
		return "", "", false
	}
	return consumer, credential, true
}

// StreamRoute is an APISIX stream route: TCP connections (TLS ones by
// their SNI) matched by the client's and the listener's address, proxied
// to an upstream.
type StreamRoute struct {
	ID         string    `json:"-"`
	Name       string    `json:"name"`
	RemoteAddr string    `json:"remote_addr"`
	ServerAddr string    `json:"server_addr"`
	ServerPort int       `json:"server_port"`
	SNI        string    `json:"sni"`
	Upstream   *Upstream `json:"upstream"`
	UpstreamID FlexID    `json:"upstream_id"`
	ServiceID  FlexID    `json:"service_id"`
}

// L4Scheme reports whether an upstream scheme is a stream one: tcp or tls
// (the stream proxy's; an HTTP route cannot use them).
func L4Scheme(scheme string) bool { return scheme == "tcp" || scheme == "tls" }

// ConsumerGroup is APISIX 3.x's consumer group: plugins its consumers run
// (a consumer's own configuration of a plugin replaces the group's).
type ConsumerGroup struct {
	ID      string  `json:"-"`
	Plugins Plugins `json:"plugins"`
}

// GlobalRule holds plugins that run on every request.
type GlobalRule struct {
	ID      string  `json:"-"`
	Plugins Plugins `json:"plugins"`
}

// PluginConfig is a reusable set of plugins a route refers to.
type PluginConfig struct {
	ID      string  `json:"-"`
	Plugins Plugins `json:"plugins"`
}

// FlexID is an id given as a JSON string or integer.
type FlexID string

// UnmarshalJSON accepts "1" and 1.
func (f *FlexID) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = FlexID(s)
		return nil
	}
	if string(b) == "null" {
		*f = ""
		return nil
	}
	*f = FlexID(b)
	return nil
}

// IDString renders an id value from a decoded document (string or number).
func IDString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return luaNum(x), true // Lua's tostring: 1.0 is "1"
	case float64:
		return luaNumString(x), true
	}
	return "", false
}
