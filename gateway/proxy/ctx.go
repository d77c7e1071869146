package proxy

import (
	"cmp"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
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
	remotePort int    // set by a plugin (real-ip); 0: the connection's
	realAddr   bool   // a plugin replaced remote_addr
	host       string // Host without port, as matched
	node       string // host of the node that answered
	nodeAddr   string // its host:port
	hostSet    bool   // a plugin set the upstream Host
	scheme     string // a plugin set the upstream scheme ("http", "https")
	uriSet     bool   // a plugin set the upstream URI
	timed      bool   // log plugins run: measure times
	responding bool   // header filter phase: headers change the response in place
	h2         bool   // received over HTTP/2
	upRef      *gateway.UpstreamRef
	reqLen     int64     // request size for the log phase
	async      bool      // a streamed body or a tunnel ends the request later (finish)
	upgrade    bool      // the client asks for a protocol upgrade
	h2req      *h2Stream // an HTTP/2 WebSocket's stream (extended CONNECT)
	start      time.Time
	respHdrs   []respHeader
	values     []ctxValue
	arena      []byte // Buffer's bytes
	bodyBuf    []byte // body filters' dst
	scratch    []byte
	upStatus   []byte // statuses of the upstream attempts, "502, 502, "
	log        gateway.LogEntry
	gqlRead    bool            // the request's GraphQL document was looked for
	gqlOK      bool            // and parsed
	gql        gateway.GraphQL // graphql_* (RootFields reused)
	head       headBody        // a streamed request body's first bytes (RequestBody)
	respMax    int             // CaptureResponseBody's bound; 0: none asked
	respCap    []byte          // the captured response body, when respCapped
	respCapped bool            // respCap holds it (streamed, or taken before an encoder)
	respPlain  bool            // an encoder changed the body after: respCap is not in its coding
	upBody     *upstreamBody   // the response body streaming from the upstream
}

type respHeader struct {
	name string
	val  []byte
	op   headerOp
}

type headerOp uint8

const (
	opSet headerOp = iota
	opAdd
	opDel
)

type ctxValue struct {
	key any
	v   int64
	s   string
}

// Per-request buffers larger than this are not kept in the pool.
const maxPooledBuf = 1 << 20

var _ gateway.Ctx = (*reqCtx)(nil)

func (rc *reqCtx) reset() {
	rc.fc, rc.snap, rc.route, rc.consumer, rc.upRef, rc.h2req = nil, nil, nil, nil, nil, nil
	rc.async, rc.upgrade, rc.upBody = false, false, nil
	rc.reqLen = 0
	rc.match = router.Match{}
	rc.remoteAddr, rc.remotePort, rc.realAddr = netip.Addr{}, 0, false
	rc.remoteStr = rc.remoteStr[:0]
	rc.host, rc.node, rc.nodeAddr, rc.scheme = "", "", "", ""
	rc.hostSet, rc.uriSet, rc.timed, rc.responding, rc.h2 = false, false, false, false, false
	rc.start = time.Time{}
	rc.respHdrs = rc.respHdrs[:0]
	clear(rc.values)
	rc.values = rc.values[:0]
	rc.arena = rc.arena[:0]
	if cap(rc.arena) > maxPooledBuf {
		rc.arena = nil
	}
	if cap(rc.bodyBuf) > maxPooledBuf {
		rc.bodyBuf = nil
	}
	rc.log = gateway.LogEntry{}
	rc.gqlRead, rc.gqlOK = false, false
	if rc.head.r != nil || rc.respMax > 0 {
		rc.resetCapture()
	}
}

// resetCapture forgets RequestBody's and CaptureResponseBody's bytes.
func (rc *reqCtx) resetCapture() {
	rc.head = headBody{b: rc.head.b[:0]}
	if cap(rc.head.b) > maxPooledBuf {
		rc.head.b = nil
	}
	rc.respCap = rc.respCap[:0]
	if cap(rc.respCap) > maxPooledBuf {
		rc.respCap = nil
	}
	rc.respMax, rc.respCapped, rc.respPlain = 0, false, false
}

// b2s views b as a string without copying; valid while b is unchanged.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (rc *reqCtx) init(fc *fasthttp.RequestCtx) {
	rc.fc = fc
	// Response header names go out as set (plugins set canonical ones, an
	// upstream's keep its spelling): no per-header normalization.
	fc.Response.Header.DisableNormalizing()
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
		port := rc.remotePort
		if port == 0 {
			ta, ok := fc.RemoteAddr().(*net.TCPAddr)
			if !ok {
				return ""
			}
			port = ta.Port
		}
		return rc.appendVar(strconv.AppendInt(rc.scratch[:0], int64(port), 10))
	case "realip_remote_addr":
		if ta, ok := fc.RemoteAddr().(*net.TCPAddr); ok {
			return rc.appendVar(ta.AddrPort().Addr().Unmap().AppendTo(rc.scratch[:0]))
		}
		return ""
	case "server_addr", "server_port":
		ta, ok := fc.LocalAddr().(*net.TCPAddr)
		if !ok {
			return ""
		}
		if name == "server_port" {
			return rc.appendVar(strconv.AppendInt(rc.scratch[:0], int64(ta.Port), 10))
		}
		return rc.appendVar(ta.AddrPort().Addr().Unmap().AppendTo(rc.scratch[:0]))
	case "uri":
		return b2s(fc.Path())
	case "request_uri":
		return b2s(fc.Request.Header.RequestURI())
	case "query_string", "args":
		return b2s(fc.URI().QueryString())
	case "is_args":
		if len(fc.URI().QueryString()) > 0 {
			return "?"
		}
		return ""
	case "server_protocol":
		if rc.h2 {
			return "HTTP/2.0"
		}
		return b2s(fc.Request.Header.Protocol())
	case "balancer_ip":
		return rc.node
	case "balancer_port":
		if i := strings.LastIndexByte(rc.nodeAddr, ':'); i >= 0 {
			return rc.nodeAddr[i+1:]
		}
		return ""
	case "upstream_addr":
		return rc.nodeAddr
	case "status":
		return rc.appendVar(strconv.AppendInt(rc.scratch[:0], int64(fc.Response.StatusCode()), 10))
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
		if name == "http_x_forwarded_for" {
			// As nginx's $http_x_forwarded_for: every such header, joined.
			if all := fc.Request.Header.PeekAll(b2s(rc.scratch)); len(all) > 1 {
				b := rc.scratch[:0]
				for i, v := range all {
					if i > 0 {
						b = append(b, ", "...)
					}
					b = append(b, v...)
				}
				return rc.appendVar(b)
			}
		}
		v := fc.Request.Header.PeekBytes(rc.scratch)
		if v == nil && strings.IndexByte(name[5:], '_') >= 0 {
			// nginx (underscores_in_headers on) also matches "custom_header"
			v = fc.Request.Header.Peek(name[5:])
		}
		return b2s(v)
	case strings.HasPrefix(name, "arg_"):
		return b2s(fc.QueryArgs().Peek(name[4:]))
	case strings.HasPrefix(name, "post_arg_"):
		// nginx's get_post_args: urlencoded bodies only (fasthttp's
		// PostArgs parses nothing else).
		return b2s(fc.PostArgs().Peek(name[9:]))
	case strings.HasPrefix(name, "cookie_"):
		return b2s(fc.Request.Header.Cookie(name[7:]))
	}
	return ""
}

// appendVar copies a formatted variable into the request's buffer, so it
// stays valid for the rest of the request (the scratch buffer does not).
func (rc *reqCtx) appendVar(b []byte) string {
	buf := rc.Buffer(len(b))
	copy(buf, b)
	rc.scratch = b
	return b2s(buf)
}

var _ gateway.ListVars = (*reqCtx)(nil)

// VarList gives APISIX's graphql_operation, graphql_name and
// graphql_root_fields (a list), read from the request's GraphQL document
// once; they are nil when it has none that parses.
func (rc *reqCtx) VarList(name string) (values []string, isList, ok bool) {
	if !rc.gqlRead {
		rc.gqlRead = true
		if doc := rc.graphQLDocument(); doc != nil {
			g, err := gateway.ParseGraphQL(doc, rc.gql.RootFields)
			if err == nil {
				rc.gql, rc.gqlOK = g, true
			}
		}
	}
	if !rc.gqlOK {
		return nil, false, false
	}
	switch name {
	case "graphql_operation":
		if rc.gql.Operation == "" {
			return nil, false, false // a fragment: no operation
		}
		return []string{rc.gql.Operation}, false, true
	case "graphql_name":
		return []string{rc.gql.Name}, false, true
	case "graphql_root_fields":
		return rc.gql.RootFields, true, true
	}
	return nil, false, false
}

// maxGraphQLBody is APISIX's default graphql.max_size (1 MiB).
const maxGraphQLBody = 1 << 20

// graphQLDocument is where APISIX reads a GraphQL document: the first
// query argument of a GET; a POST's body, or its JSON "query" field when
// the Content-Type is application/json. nil when there is none (or the
// body is larger than 1 MiB, or of unknown length).
func (rc *reqCtx) graphQLDocument() []byte {
	req := &rc.fc.Request
	switch b2s(req.Header.Method()) {
	case http.MethodGet:
		return rc.fc.QueryArgs().Peek("query")
	case http.MethodPost:
		if cl := req.Header.ContentLength(); req.IsBodyStream() && (cl < 0 || cl > maxGraphQLBody) {
			return nil
		}
		body := req.Body()
		if len(body) == 0 || len(body) > maxGraphQLBody {
			return nil
		}
		if b2s(req.Header.ContentType()) != "application/json" {
			return body
		}
		var v struct {
			Query *string `json:"query"`
		}
		if json.Unmarshal(body, &v) != nil || v.Query == nil {
			return nil
		}
		return []byte(*v.Query)
	}
	return nil
}

var _ gateway.BodyCapture = (*reqCtx)(nil)

// RequestBody implements gateway.BodyCapture. A body read whole is
// there to slice; a streamed one is read up to max (headBody) unless it
// went upstream already.
func (rc *reqCtx) RequestBody(max int) []byte {
	req := &rc.fc.Request
	var b []byte
	switch {
	case rc.head.r != nil:
		b = rc.head.b
	case !req.IsBodyStream():
		b = req.Body()
	default:
		if _, sent := req.BodyStream().(*reqBody); sent {
			return nil
		}
		cl := req.Header.ContentLength()
		rc.head.fill(req.BodyStream(), max)
		req.SetBodyStream(&rc.head, cl) // the Content-Length stays: prepareBody's 413 still applies
		b = rc.head.b
	}
	return b[:min(len(b), max)]
}

// headBody is a streamed request body whose first bytes were read: it
// gives them again, then the rest of r.
type headBody struct {
	b   []byte
	off int
	r   io.Reader
	err error // what ended fill early (io.EOF at the body's end)
}

// fill reads up to max bytes of r into b (grown as they arrive, not to max).
func (h *headBody) fill(r io.Reader, max int) {
	h.r, h.off, h.err = r, 0, nil
	b := h.b[:0]
	for len(b) < max && h.err == nil {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(max-len(b), cmp.Or(len(b), 4096)))
		}
		var n int
		n, h.err = r.Read(b[len(b):min(cap(b), max)])
		b = b[:len(b)+n]
	}
	h.b = b
}

func (h *headBody) Read(p []byte) (int, error) {
	if h.off < len(h.b) {
		n := copy(p, h.b[h.off:])
		h.off += n
		return n, nil
	}
	if h.err != nil {
		return 0, h.err
	}
	return h.r.Read(p)
}

// CaptureResponseBody implements gateway.BodyCapture: a streamed body is
// copied as it goes (upstreamBody.Read), a buffered one sliced or, when
// an encoder runs, copied before it (filter).
func (rc *reqCtx) CaptureResponseBody(max int) {
	if max <= rc.respMax {
		return
	}
	rc.respMax = max
	if b := rc.upBody; b != nil {
		b.capture, b.max, rc.respCapped = &rc.respCap, max, true
	}
}

// ResponseBody implements gateway.BodyCapture.
func (rc *reqCtx) ResponseBody() ([]byte, string) {
	resp := &rc.fc.Response
	var b []byte
	switch {
	case rc.respMax == 0:
		return nil, ""
	case rc.respCapped:
		b = rc.respCap
	case !resp.IsBodyStream():
		b = resp.Body()
	}
	enc := ""
	if !rc.respPlain {
		enc = b2s(resp.Header.ContentEncoding())
	}
	return b[:min(len(b), rc.respMax)], enc
}

func (rc *reqCtx) SetUpstreamURI(uri string) {
	rc.fc.Request.SetRequestURI(uri)
	rc.uriSet = true
}

func (rc *reqCtx) SetUpstreamHost(host string) {
	rc.fc.Request.Header.SetHost(host)
	rc.hostSet = true
}

func (rc *reqCtx) SetUpstreamMethod(method string) { rc.fc.Request.Header.SetMethod(method) }

func (rc *reqCtx) SetUpstreamScheme(scheme string) { rc.scheme = scheme }

func (rc *reqCtx) SetUpstreamHeader(name, value string) {
	if value == "" {
		rc.fc.Request.Header.Del(name)
		return
	}
	rc.fc.Request.Header.Set(name, value)
}

func (rc *reqCtx) AddUpstreamHeader(name, value string) { rc.fc.Request.Header.Add(name, value) }

func (rc *reqCtx) RequestHeaders(fn func(name, value string)) {
	for k, v := range rc.fc.Request.Header.All() {
		fn(strings.ToLower(b2s(k)), b2s(v))
	}
}

func (rc *reqCtx) ResponseHeaders(fn func(name, value string)) {
	for k, v := range rc.fc.Response.Header.All() {
		fn(strings.ToLower(b2s(k)), b2s(v))
	}
}

func (rc *reqCtx) SetResponseHeader(name, value string) {
	if rc.responding {
		rc.delRespHeader(name)
		if value != "" {
			rc.fc.Response.Header.SetCanonical(unsafeBytes(name), unsafeBytes(value))
		}
		return
	}
	op := opSet
	if value == "" {
		op = opDel
	}
	rc.addRespHeader(name, op, func(b []byte) []byte { return append(b, value...) })
}

func (rc *reqCtx) SetResponseHeaderInt(name string, v int64) {
	if rc.responding {
		rc.delRespHeader(name)
		rc.scratch = strconv.AppendInt(rc.scratch[:0], v, 10)
		rc.fc.Response.Header.SetCanonical(unsafeBytes(name), rc.scratch)
		return
	}
	rc.addRespHeader(name, opSet, func(b []byte) []byte { return strconv.AppendInt(b, v, 10) })
}

func (rc *reqCtx) AddResponseHeader(name, value string) {
	if rc.responding {
		rc.fc.Response.Header.Add(name, value)
		return
	}
	rc.addRespHeader(name, opAdd, func(b []byte) []byte { return append(b, value...) })
}

// addRespHeader records a header change for applyRespHeaders: a set or
// delete replaces an earlier set or delete of the same name.
func (rc *reqCtx) addRespHeader(name string, op headerOp, fill func([]byte) []byte) {
	if op != opAdd {
		for i := range rc.respHdrs {
			if h := &rc.respHdrs[i]; h.name == name && h.op != opAdd {
				h.val, h.op = fill(h.val[:0]), op
				return
			}
		}
	}
	if len(rc.respHdrs) < cap(rc.respHdrs) {
		rc.respHdrs = rc.respHdrs[:len(rc.respHdrs)+1]
		h := &rc.respHdrs[len(rc.respHdrs)-1]
		h.name, h.val, h.op = name, fill(h.val[:0]), op
		return
	}
	rc.respHdrs = append(rc.respHdrs, respHeader{name: name, val: fill(nil), op: op})
}

// applyRespHeaders copies plugin-set headers onto the response; from then
// on header changes go to the response directly.
func (rc *reqCtx) applyRespHeaders() {
	h := &rc.fc.Response.Header
	for _, rh := range rc.respHdrs {
		switch rh.op {
		case opSet:
			h.SetCanonical(unsafeBytes(rh.name), rh.val)
		case opAdd:
			h.AddBytesKV(unsafeBytes(rh.name), rh.val)
		case opDel:
			h.Del(rh.name)
		}
	}
	rc.responding = true
}

func (rc *reqCtx) ResponseHeader(name string) string {
	if !rc.responding {
		for i := len(rc.respHdrs) - 1; i >= 0; i-- {
			if h := &rc.respHdrs[i]; strings.EqualFold(h.name, name) && h.op != opDel {
				return b2s(h.val)
			}
		}
		return ""
	}
	if len(name) == len(headerContentLength) && equalFold(unsafeBytes(name), headerContentLength) {
		// The body is whole: what will be sent is its length.
		if b := rc.fc.Response.Body(); len(b) > 0 {
			return rc.appendVar(strconv.AppendInt(rc.scratch[:0], int64(len(b)), 10))
		}
	}
	for k, v := range rc.fc.Response.Header.All() {
		if len(k) == len(name) && equalFold(k, unsafeBytes(name)) {
			return b2s(v)
		}
	}
	return ""
}

var (
	headerContentType   = []byte("Content-Type")
	headerContentLength = []byte("Content-Length")
)

// delRespHeader removes a response header whatever the case of its name:
// upstream headers keep the spelling the upstream sent (the pool does not
// normalize them), and HTTP header names are case-insensitive.
func (rc *reqCtx) delRespHeader(name string) {
	h := &rc.fc.Response.Header
	if len(name) == len(headerContentType) && equalFold(unsafeBytes(name), headerContentType) {
		h.DelBytes(headerContentType) // kept apart by fasthttp, whatever the spelling
		return
	}
	for range 16 { // bounded, should a header refuse to go
		found := false
		for k := range h.All() {
			if len(k) == len(name) && equalFold(k, unsafeBytes(name)) {
				rc.scratch, found = append(rc.scratch[:0], k...), true
				break
			}
		}
		if !found {
			return
		}
		h.DelBytes(rc.scratch)
	}
}

func (rc *reqCtx) Status() int            { return rc.fc.Response.StatusCode() }
func (rc *reqCtx) SetStatus(code int)     { rc.fc.Response.SetStatusCode(code) }
func (rc *reqCtx) RemoteAddr() netip.Addr { return rc.remoteAddr }

func (rc *reqCtx) SetRemoteAddr(addr netip.Addr, port int) {
	rc.remoteAddr = addr.Unmap()
	rc.remoteStr = rc.remoteAddr.AppendTo(rc.remoteStr[:0])
	rc.realAddr = true
	if port != 0 {
		rc.remotePort = port
	}
}

func (rc *reqCtx) SetUpstream(ref *gateway.UpstreamRef) { rc.upRef = ref }

func (rc *reqCtx) Buffer(n int) []byte {
	if len(rc.arena)+n > cap(rc.arena) {
		// A new block; slices handed out from the old one stay valid.
		rc.arena = make([]byte, 0, max(2*cap(rc.arena), n, 256))
	}
	i := len(rc.arena)
	rc.arena = rc.arena[:i+n]
	return rc.arena[i : i+n : i+n]
}

func (rc *reqCtx) SetValue(key any, v int64) { rc.value(key).v = v }
func (rc *reqCtx) SetText(key any, s string) { rc.value(key).s = s }

func (rc *reqCtx) Value(key any) (int64, bool) {
	if i := rc.findValue(key); i >= 0 {
		return rc.values[i].v, true
	}
	return 0, false
}

func (rc *reqCtx) Text(key any) (string, bool) {
	if i := rc.findValue(key); i >= 0 {
		return rc.values[i].s, true
	}
	return "", false
}

func (rc *reqCtx) findValue(key any) int {
	for i := range rc.values {
		if rc.values[i].key == key {
			return i
		}
	}
	return -1
}

// value is key's entry, added if new.
func (rc *reqCtx) value(key any) *ctxValue {
	if i := rc.findValue(key); i >= 0 {
		return &rc.values[i]
	}
	rc.values = append(rc.values, ctxValue{key: key})
	return &rc.values[len(rc.values)-1]
}

func (rc *reqCtx) Consumer() *gateway.ConsumerEntry { return rc.consumer }

func (rc *reqCtx) SetConsumer(c *gateway.ConsumerEntry) {
	rc.consumer = c
	if c != nil && rc.snap.consumerHeaders {
		// APISIX 3.x's attach_consumer: who the upstream is talking to,
		// never what the client claimed ("" removes the client's header).
		rc.SetUpstreamHeader("X-Consumer-Username", c.Username)
		rc.SetUpstreamHeader("X-Credential-Identifier", c.CredentialID)
		rc.SetUpstreamHeader("X-Consumer-Custom-ID", c.CustomID)
	}
	// The consumer's own log plugins need the request timed from here on.
	if c != nil && !rc.timed && hasLogger(c.Chain) {
		rc.timed, rc.start = true, time.Now()
	}
}
func (rc *reqCtx) LookupConsumer(plugin, credential string) *gateway.ConsumerEntry {
	return rc.snap.compiled.LookupConsumer(plugin, credential)
}

// expand replaces each $name and ${name} in tmpl with the variable's value,
// as APISIX's core.utils.resolve_var (the regex (?<!\\)\$\{?(\w+)\}?): a
// "$" after a backslash stays as it is. It serves var_combination keys,
// proxy-rewrite and response-rewrite values; it allocates, and only those
// configurations use it.
func (rc *reqCtx) expand(tmpl string) string {
	return gateway.ExpandVars(tmpl, rc)
}

// Expand is expand for plugins (limit-count's var_combination).
func (rc *reqCtx) Expand(tmpl string) string { return rc.expand(tmpl) }
