// Package plugintest helps test plugins: Ctx, an in-memory gateway.Ctx for
// unit tests and per-plugin benchmarks (allocation-free once warm, so a
// benchmark's allocations are the plugin's), and Gateway, the real engine
// (gateway/proxy) on 127.0.0.1 with a real upstream, for HTTP-level tests.
package plugintest

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/linkgate/linkgate/gateway"
)

// Header is one header name and value.
type Header struct{ Name, Value string }

// Ctx is a request as a plugin sees it, held in plain fields. Request
// headers are read as Var("http_<name>"); headers a plugin sets upstream
// are read back the same way, as the engine does.
type Ctx struct {
	Vars            map[string]string
	Remote          netip.Addr
	RemotePort      int
	UpstreamURI     string
	UpstreamHost    string
	UpstreamMethod  string
	UpstreamScheme  string
	UpstreamHeaders []Header // set by the plugin; "" value: removed
	UpstreamAdded   []Header // added by the plugin (AddUpstreamHeader)
	RespHeaders     []Header // the response's; Add appends, Set replaces
	StatusCode      int
	User            *gateway.ConsumerEntry
	// Compiled answers LookupConsumer (see Compile).
	Compiled *gateway.Compiled
	Upstream *gateway.UpstreamRef
	// ReqBody, RespBody and RespEncoding are the bodies BodyCapture
	// gives; RespMax is what CaptureResponseBody asked for (0: nothing).
	ReqBody      []byte
	RespBody     []byte
	RespEncoding string
	RespMax      int

	values    []value
	arena     []byte
	remoteStr string
	remoteFor netip.Addr
	statusStr string
	statusFor int
	portStr   string
	portFor   int
}

type value struct {
	key any
	v   int64
	s   string
}

var (
	_ gateway.Ctx         = (*Ctx)(nil)
	_ gateway.BodyCapture = (*Ctx)(nil)
)

// NewCtx returns a GET / from 127.0.0.1 with vars set.
func NewCtx(vars map[string]string) *Ctx {
	c := &Ctx{Vars: map[string]string{}, Remote: netip.MustParseAddr("127.0.0.1"), RemotePort: 40000, StatusCode: 200}
	for k, v := range map[string]string{"uri": "/", "request_uri": "/", "request_method": "GET", "scheme": "http", "host": "localhost", "server_protocol": "HTTP/1.1"} {
		c.Vars[k] = v
	}
	for k, v := range vars {
		c.Vars[k] = v
	}
	return c
}

// Reset forgets what the plugin did, keeping the request, so a benchmark
// can run the next iteration without allocating.
func (c *Ctx) Reset() {
	c.UpstreamURI, c.UpstreamHost, c.User, c.Upstream = "", "", nil, nil
	c.UpstreamHeaders, c.UpstreamAdded, c.RespHeaders = c.UpstreamHeaders[:0], c.UpstreamAdded[:0], c.RespHeaders[:0]
	c.StatusCode, c.RespMax = 200, 0
	clear(c.values)
	c.values, c.arena = c.values[:0], c.arena[:0]
}

// headerVar reports whether v is "http_" + name in variable form.
func headerVar(v, name string) bool {
	if len(v) != len(name)+5 || v[:5] != "http_" {
		return false
	}
	for i := 0; i < len(name); i++ {
		a, b := v[5+i], name[i]
		if b == '-' {
			b = '_'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

func (c *Ctx) Var(name string) string {
	if strings.HasPrefix(name, "http_") {
		for i := len(c.UpstreamHeaders) - 1; i >= 0; i-- {
			if headerVar(name, c.UpstreamHeaders[i].Name) {
				return c.UpstreamHeaders[i].Value
			}
		}
	}
	switch name {
	// Formatted once per value, so a warm benchmark does not allocate.
	case "remote_addr":
		if c.remoteFor != c.Remote || c.remoteStr == "" {
			c.remoteFor, c.remoteStr = c.Remote, c.Remote.String()
		}
		return c.remoteStr
	case "remote_port":
		if c.portFor != c.RemotePort || c.portStr == "" {
			c.portFor, c.portStr = c.RemotePort, strconv.Itoa(c.RemotePort)
		}
		return c.portStr
	case "status":
		if c.statusFor != c.StatusCode || c.statusStr == "" {
			c.statusFor, c.statusStr = c.StatusCode, strconv.Itoa(c.StatusCode)
		}
		return c.statusStr
	case "consumer_name":
		if c.User != nil {
			return c.User.Username
		}
	}
	return c.Vars[name]
}

func (c *Ctx) SetUpstreamURI(uri string)   { c.UpstreamURI = uri }
func (c *Ctx) SetUpstreamHost(host string) { c.UpstreamHost = host }

func (c *Ctx) SetUpstreamMethod(method string) { c.UpstreamMethod = method }

func (c *Ctx) SetUpstreamScheme(scheme string) { c.UpstreamScheme = scheme }

// RequestHeaders lists the http_* Vars as headers (then those set upstream).
func (c *Ctx) RequestHeaders(fn func(name, value string)) {
	for _, k := range slices.Sorted(maps.Keys(c.Vars)) {
		if name, ok := strings.CutPrefix(k, "http_"); ok {
			fn(strings.ReplaceAll(name, "_", "-"), c.Vars[k])
		}
	}
	for _, h := range c.UpstreamHeaders {
		fn(strings.ToLower(h.Name), h.Value)
	}
	for _, h := range c.UpstreamAdded {
		fn(strings.ToLower(h.Name), h.Value)
	}
}

// ResponseHeaders lists RespHeaders.
func (c *Ctx) ResponseHeaders(fn func(name, value string)) {
	for _, h := range c.RespHeaders {
		fn(strings.ToLower(h.Name), h.Value)
	}
}

func (c *Ctx) SetUpstreamHeader(name, value string) {
	c.UpstreamHeaders = append(c.UpstreamHeaders, Header{name, value})
}

// AddUpstreamHeader records an added line in UpstreamAdded.
func (c *Ctx) AddUpstreamHeader(name, value string) {
	c.UpstreamAdded = append(c.UpstreamAdded, Header{name, value})
}

func (c *Ctx) SetResponseHeader(name, value string) {
	kept := c.RespHeaders[:0]
	for _, h := range c.RespHeaders {
		if !strings.EqualFold(h.Name, name) {
			kept = append(kept, h)
		}
	}
	c.RespHeaders = kept
	if value != "" {
		c.RespHeaders = append(c.RespHeaders, Header{name, value})
	}
}

func (c *Ctx) SetResponseHeaderInt(name string, v int64) {
	c.SetResponseHeader(name, strconv.FormatInt(v, 10))
}

func (c *Ctx) AddResponseHeader(name, value string) {
	c.RespHeaders = append(c.RespHeaders, Header{name, value})
}

// ResponseHeader returns the first value of a response header.
func (c *Ctx) ResponseHeader(name string) string {
	for _, h := range c.RespHeaders {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// ResponseHeaderValues returns every value of a response header.
func (c *Ctx) ResponseHeaderValues(name string) []string {
	var out []string
	for _, h := range c.RespHeaders {
		if strings.EqualFold(h.Name, name) {
			out = append(out, h.Value)
		}
	}
	return out
}

func (c *Ctx) Status() int                           { return c.StatusCode }
func (c *Ctx) SetStatus(code int)                    { c.StatusCode = code }
func (c *Ctx) RemoteAddr() netip.Addr                { return c.Remote }
func (c *Ctx) Consumer() *gateway.ConsumerEntry      { return c.User }
func (c *Ctx) SetConsumer(ce *gateway.ConsumerEntry) { c.User = ce }
func (c *Ctx) SetUpstream(ref *gateway.UpstreamRef)  { c.Upstream = ref }

func (c *Ctx) SetRemoteAddr(addr netip.Addr, port int) {
	c.Remote = addr
	if port != 0 {
		c.RemotePort = port
	}
}

func (c *Ctx) LookupConsumer(plugin, credential string) *gateway.ConsumerEntry {
	if c.Compiled == nil {
		return nil
	}
	return c.Compiled.LookupConsumer(plugin, credential)
}

// Expand replaces $name and ${name} as the engine does.
func (c *Ctx) Expand(tmpl string) string { return gateway.ExpandVars(tmpl, c) }

func (c *Ctx) Buffer(n int) []byte {
	if len(c.arena)+n > cap(c.arena) {
		c.arena = make([]byte, 0, max(2*cap(c.arena), n, 256))
	}
	i := len(c.arena)
	c.arena = c.arena[:i+n]
	return c.arena[i : i+n : i+n]
}

func (c *Ctx) SetValue(key any, v int64) { c.value(key).v = v }
func (c *Ctx) SetText(key any, s string) { c.value(key).s = s }

func (c *Ctx) Value(key any) (int64, bool) {
	for i := range c.values {
		if c.values[i].key == key {
			return c.values[i].v, true
		}
	}
	return 0, false
}

func (c *Ctx) Text(key any) (string, bool) {
	for i := range c.values {
		if c.values[i].key == key {
			return c.values[i].s, true
		}
	}
	return "", false
}

func (c *Ctx) value(key any) *value {
	for i := range c.values {
		if c.values[i].key == key {
			return &c.values[i]
		}
	}
	c.values = append(c.values, value{key: key})
	return &c.values[len(c.values)-1]
}

// RequestBody gives ReqBody's first max bytes.
func (c *Ctx) RequestBody(max int) []byte { return c.ReqBody[:min(len(c.ReqBody), max)] }

// CaptureResponseBody records the largest max asked.
func (c *Ctx) CaptureResponseBody(n int) { c.RespMax = max(c.RespMax, n) }

// ResponseBody gives RespBody's first RespMax bytes (none if not asked).
func (c *Ctx) ResponseBody() ([]byte, string) {
	return c.RespBody[:min(len(c.RespBody), c.RespMax)], c.RespEncoding
}
