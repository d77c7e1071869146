package proxy

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/router"
)

// reqCtx is one request's state, pooled: it implements gateway.Ctx for
// plugins and gateway.Vars for route matching.
type reqCtx struct {
	fc       *fasthttp.RequestCtx
	snap     *snapshot
	match    router.Match
	route    *routeRT
	consumer *gateway.ConsumerEntry

	remoteAddr netip.Addr
	remoteStr  []byte // remote_addr, formatted once
	host       string // Host without port, as matched
	node       string // address of the node that answered
	hostSet    bool   // a plugin set the upstream Host
	uriSet     bool   // a plugin set the upstream URI
	timed      bool   // log plugins run: measure times
	respHdrs   []respHeader
	scratch    []byte
	log        gateway.LogEntry
}

type respHeader struct {
	name string
	val  []byte
}

var _ gateway.Ctx = (*reqCtx)(nil)

func (rc *reqCtx) reset() {
	rc.fc, rc.snap, rc.route, rc.consumer = nil, nil, nil, nil
	rc.match = router.Match{}
	rc.remoteAddr = netip.Addr{}
	rc.remoteStr = rc.remoteStr[:0]
	rc.host, rc.node = "", ""
	rc.hostSet, rc.uriSet, rc.timed = false, false, false
	rc.respHdrs = rc.respHdrs[:0]
	rc.log = gateway.LogEntry{}
}

// b2s views b as a string without copying; valid while b is unchanged.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (rc *reqCtx) init(fc *fasthttp.RequestCtx) {
	rc.fc = fc
	if ta, ok := fc.RemoteAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		rc.remoteAddr = ap.Addr().Unmap()
	}
	rc.remoteStr = rc.remoteAddr.AppendTo(rc.remoteStr[:0])
	host := b2s(fc.Host())
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:i]
	}
	rc.host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// Var implements gateway.Vars and gateway.Ctx.
func (rc *reqCtx) Var(name string) string {
	fc := rc.fc
	switch name {
	case "remote_addr":
		return b2s(rc.remoteStr)
	case "remote_port":
		if ta, ok := fc.RemoteAddr().(*net.TCPAddr); ok {
			rc.scratch = strconv.AppendInt(rc.scratch[:0], int64(ta.Port), 10)
			return b2s(rc.scratch)
		}
		return ""
	case "server_addr", "server_port":
		ta, ok := fc.LocalAddr().(*net.TCPAddr)
		if !ok {
			return ""
		}
		if name == "server_port" {
			rc.scratch = strconv.AppendInt(rc.scratch[:0], int64(ta.Port), 10)
		} else {
			rc.scratch = ta.AddrPort().Addr().Unmap().AppendTo(rc.scratch[:0])
		}
		return b2s(rc.scratch)
	case "uri":
		return b2s(fc.Path())
	case "request_uri":
		return b2s(fc.Request.Header.RequestURI())
	case "query_string", "args":
		return b2s(fc.URI().QueryString())
	case "host":
		return rc.host
	case "scheme":
		if fc.IsTLS() {
			return "https"
		}
		return "http"
	case "request_method":
		return b2s(fc.Method())
	case "consumer_name":
		if rc.consumer != nil {
			return rc.consumer.Username
		}
		return ""
	case "route_id":
		if rc.route != nil {
			return rc.route.e.ID
		}
		return ""
	case "route_name":
		if rc.route != nil {
			return rc.route.e.Name
		}
		return ""
	case "service_id":
		if rc.route != nil {
			return rc.route.e.ServiceID
		}
		return ""
	}
	switch {
	case strings.HasPrefix(name, "http_"):
		rc.scratch = append(rc.scratch[:0], name[5:]...)
		for i, c := range rc.scratch {
			if c == '_' {
				rc.scratch[i] = '-'
			}
		}
		return b2s(fc.Request.Header.PeekBytes(rc.scratch))
	case strings.HasPrefix(name, "arg_"):
		return b2s(fc.QueryArgs().Peek(name[4:]))
	case strings.HasPrefix(name, "cookie_"):
		return b2s(fc.Request.Header.Cookie(name[7:]))
	}
	return ""
}

func (rc *reqCtx) SetUpstreamURI(uri string) {
	rc.fc.Request.SetRequestURI(uri)
	rc.uriSet = true
}

func (rc *reqCtx) SetUpstreamHost(host string) {
	rc.fc.Request.Header.SetHost(host)
	rc.hostSet = true
}

func (rc *reqCtx) SetUpstreamHeader(name, value string) {
	if value == "" {
		rc.fc.Request.Header.Del(name)
		return
	}
	rc.fc.Request.Header.Set(name, value)
}

func (rc *reqCtx) SetResponseHeader(name, value string) {
	rc.addRespHeader(name, func(b []byte) []byte { return append(b, value...) })
}

func (rc *reqCtx) SetResponseHeaderInt(name string, v int64) {
	rc.addRespHeader(name, func(b []byte) []byte { return strconv.AppendInt(b, v, 10) })
}

func (rc *reqCtx) addRespHeader(name string, fill func([]byte) []byte) {
	for i := range rc.respHdrs {
		if rc.respHdrs[i].name == name {
			rc.respHdrs[i].val = fill(rc.respHdrs[i].val[:0])
			return
		}
	}
	if len(rc.respHdrs) < cap(rc.respHdrs) {
		rc.respHdrs = rc.respHdrs[:len(rc.respHdrs)+1]
		h := &rc.respHdrs[len(rc.respHdrs)-1]
		h.name, h.val = name, fill(h.val[:0])
		return
	}
	rc.respHdrs = append(rc.respHdrs, respHeader{name: name, val: fill(nil)})
}

// applyRespHeaders copies plugin-set headers onto the response.
func (rc *reqCtx) applyRespHeaders() {
	for _, h := range rc.respHdrs {
		rc.fc.Response.Header.SetBytesV(h.name, h.val)
	}
}

func (rc *reqCtx) Consumer() *gateway.ConsumerEntry     { return rc.consumer }
func (rc *reqCtx) SetConsumer(c *gateway.ConsumerEntry) { rc.consumer = c }
func (rc *reqCtx) LookupConsumer(plugin, credential string) *gateway.ConsumerEntry {
	return rc.snap.compiled.LookupConsumer(plugin, credential)
}

// expand replaces each $name in tmpl with the variable's value (APISIX's
// var_combination / vars_combinations keys). It allocates; only those
// configurations use it.
func (rc *reqCtx) expand(tmpl string) string {
	var b strings.Builder
	for i := 0; i < len(tmpl); {
		if tmpl[i] != '$' {
			b.WriteByte(tmpl[i])
			i++
			continue
		}
		j := i + 1
		for j < len(tmpl) && (tmpl[j] == '_' || tmpl[j] >= 'a' && tmpl[j] <= 'z' || tmpl[j] >= 'A' && tmpl[j] <= 'Z' || tmpl[j] >= '0' && tmpl[j] <= '9') {
			j++
		}
		b.WriteString(rc.Var(tmpl[i+1 : j]))
		i = j
	}
	return b.String()
}

// Expand is expand for plugins (limit-count's var_combination).
func (rc *reqCtx) Expand(tmpl string) string { return rc.expand(tmpl) }
