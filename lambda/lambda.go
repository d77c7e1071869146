// Package lambda runs an HTTP handler on AWS Lambda: it turns API Gateway
// REST API events (payload 1.0), HTTP API events (payload 2.0) and
// function URL events into requests for the very handler `linkgate serve`
// runs — a fasthttp.RequestHandler, called without a socket — and its
// responses into the proxy response each integration expects. It is one
// adapter, not a second implementation: routes, status codes and bodies are
// the handler's.
//
// Invoke never fails: an event it cannot read is answered with the
// handler's own 400 (through Options.ErrorHandler), never an invocation
// error, which API Gateway would turn into a bare 502.
package lambda

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// Options configure a Handler, as the same fields configure a
// fasthttp.Server.
type Options struct {
	// MaxBodyBytes bounds a request body (decoded); more is answered
	// through ErrorHandler with fasthttp.ErrBodyTooLarge.
	MaxBodyBytes int
	// MaxHeaderBytes bounds the request line plus headers; more is
	// answered through ErrorHandler with a *fasthttp.ErrSmallBuffer, as
	// the server does.
	MaxHeaderBytes int
	// ErrorHandler answers requests that cannot be served: too large, or
	// an event that is not an HTTP event at all (then err wraps
	// ErrMalformedEvent).
	ErrorHandler func(ctx *fasthttp.RequestCtx, err error)
}

// ErrMalformedEvent is what ErrorHandler receives for an event that is not
// an API Gateway or function URL request.
var ErrMalformedEvent = errors.New("not an API Gateway or function URL event")

// Handler implements aws-lambda-go's lambda.Handler over an HTTP handler.
type Handler struct {
	handler fasthttp.RequestHandler
	opts    Options
}

// NewHandler returns a Lambda handler serving h.
func NewHandler(h fasthttp.RequestHandler, opts Options) *Handler {
	if opts.ErrorHandler == nil {
		opts.ErrorHandler = func(ctx *fasthttp.RequestCtx, err error) {
			ctx.Error(err.Error(), fasthttp.StatusBadRequest)
		}
	}
	return &Handler{handler: h, opts: opts}
}

// event is the union of the payload 1.0 and 2.0 request formats (function
// URLs use 2.0), decoded in one pass.
type event struct {
	Version string `json:"version"`

	// Payload 2.0.
	RawPath        string   `json:"rawPath"`
	RawQueryString string   `json:"rawQueryString"`
	Cookies        []string `json:"cookies"`

	// Payload 1.0.
	HTTPMethod                      string              `json:"httpMethod"`
	Path                            string              `json:"path"`
	MultiValueHeaders               map[string][]string `json:"multiValueHeaders"`
	QueryStringParameters           map[string]string   `json:"queryStringParameters"`
	MultiValueQueryStringParameters map[string][]string `json:"multiValueQueryStringParameters"`

	Headers         map[string]string `json:"headers"`
	Body            string            `json:"body"`
	IsBase64Encoded bool              `json:"isBase64Encoded"`
	RequestContext  struct {
		Stage      string `json:"stage"`
		DomainName string `json:"domainName"`
		HTTP       struct {
			Method   string `json:"method"`
			SourceIP string `json:"sourceIp"`
		} `json:"http"`
		Identity struct {
			SourceIP string `json:"sourceIp"`
		} `json:"identity"`
	} `json:"requestContext"`
}

// v2 reports whether the event uses payload format 2.0.
func (e *event) v2() bool { return e.Version == "2.0" }

// Invoke serves one event. It returns an error only if the response cannot
// be encoded, which does not happen.
func (a *Handler) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	var ev event
	var ctx fasthttp.RequestCtx
	ctx.Response.Header.SetNoDefaultContentType(true)
	if err := json.Unmarshal(payload, &ev); err != nil {
		a.fail(&ctx, &ev, fmt.Errorf("%w: %v", ErrMalformedEvent, err))
	} else if err := a.request(&ctx, &ev); err != nil {
		a.fail(&ctx, &ev, err)
	} else {
		a.handler(&ctx)
	}
	return encodeResponse(&ev, &ctx.Response, ctx.IsHead())
}

func (a *Handler) fail(ctx *fasthttp.RequestCtx, ev *event, err error) {
	ctx.Init2(edgeConn{remote: sourceAddr(ev)}, discardLogger{}, true)
	a.opts.ErrorHandler(ctx, err)
}

// request fills ctx with the event's request.
func (a *Handler) request(ctx *fasthttp.RequestCtx, ev *event) error {
	method, path := ev.HTTPMethod, ev.Path
	if ev.v2() {
		method, path = ev.RequestContext.HTTP.Method, ev.RawPath
		// A named stage of an HTTP API prefixes the path with its name.
		if s := ev.RequestContext.Stage; s != "" && s != "$default" && (path == "/"+s || strings.HasPrefix(path, "/"+s+"/")) {
			path = path[1+len(s):]
			if path == "" {
				path = "/"
			}
		}
	} else if ev.Version != "" && ev.Version != "1.0" {
		return fmt.Errorf("%w: payload version %q", ErrMalformedEvent, ev.Version)
	}
	if method == "" || !strings.HasPrefix(path, "/") {
		return fmt.Errorf("%w: no method or path", ErrMalformedEvent)
	}
	req := &ctx.Request
	req.Header.SetMethod(method)
	size := len(method) + len(path)
	if ev.v2() {
		uri := path
		if ev.RawQueryString != "" {
			uri += "?" + ev.RawQueryString
		}
		req.SetRequestURI(uri)
		size += len(ev.RawQueryString)
	} else {
		// Payload 1.0 carries the path and parameters decoded.
		u := url.URL{Path: path, RawQuery: query(ev)}
		req.SetRequestURI(u.RequestURI())
		size += len(u.RawQuery)
	}
	addHeader := func(k, v string) {
		size += len(k) + len(v) + 4
		if strings.EqualFold(k, "Content-Length") {
			return // the body below sets it
		}
		req.Header.Add(k, v)
	}
	if !ev.v2() && len(ev.MultiValueHeaders) > 0 {
		for k, vs := range ev.MultiValueHeaders {
			for _, v := range vs {
				addHeader(k, v)
			}
		}
	} else {
		for k, v := range ev.Headers {
			addHeader(k, v)
		}
	}
	if len(ev.Cookies) > 0 {
		addHeader("Cookie", strings.Join(ev.Cookies, "; "))
	}
	// The domain the request reached, as API Gateway or the function URL
	// saw it: set by AWS, so the handler may trust it (where a Host header
	// the client sent could say anything).
	if ev.RequestContext.DomainName != "" {
		req.Header.SetHost(ev.RequestContext.DomainName)
	}
	if a.opts.MaxHeaderBytes > 0 && size > a.opts.MaxHeaderBytes {
		return errHeadersTooLarge()
	}
	body := ev.Body
	if ev.IsBase64Encoded {
		if a.opts.MaxBodyBytes > 0 && base64.StdEncoding.DecodedLen(len(body)) > a.opts.MaxBodyBytes+2 {
			return fasthttp.ErrBodyTooLarge
		}
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return fmt.Errorf("%w: body: %v", ErrMalformedEvent, err)
		}
		body = string(b)
	}
	if a.opts.MaxBodyBytes > 0 && len(body) > a.opts.MaxBodyBytes {
		return fasthttp.ErrBodyTooLarge
	}
	if body != "" {
		req.SetBodyString(body)
	}
	var conn net.Conn = edgeConn{remote: sourceAddr(ev)}
	if strings.EqualFold(string(req.Header.Peek("X-Forwarded-Proto")), "https") {
		conn = tlsEdgeConn{conn.(edgeConn)}
	}
	ctx.Init2(conn, discardLogger{}, true) // keeps the request built above
	return nil
}

// errHeadersTooLarge is the error fasthttp.Server reports for headers over
// its read buffer (a *fasthttp.ErrSmallBuffer, which cannot be built
// outside fasthttp), obtained from fasthttp itself.
var errHeadersTooLarge = sync.OnceValue(func() error {
	var h fasthttp.RequestHeader
	err := h.Read(bufio.NewReaderSize(strings.NewReader("GET / HTTP/1.1\r\nX: "+strings.Repeat("x", 64)+"\r\n\r\n"), 16))
	if err == nil {
		err = errors.New("request headers too large")
	}
	return err
})

// query encodes a payload 1.0 event's (decoded) query parameters.
func query(ev *event) string {
	params := ev.MultiValueQueryStringParameters
	if len(params) == 0 && len(ev.QueryStringParameters) > 0 {
		params = make(map[string][]string, len(ev.QueryStringParameters))
		for k, v := range ev.QueryStringParameters {
			params[k] = []string{v}
		}
	}
	return url.Values(params).Encode()
}

func sourceAddr(ev *event) net.Addr {
	ip := ev.RequestContext.HTTP.SourceIP
	if ip == "" {
		ip = ev.RequestContext.Identity.SourceIP
	}
	return &net.TCPAddr{IP: net.ParseIP(ip)}
}

// responseV1 is the payload 1.0 proxy response; responseV2 the 2.0 one
// (HTTP APIs and function URLs).
type responseV1 struct {
	StatusCode        int                 `json:"statusCode"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded"`
}

type responseV2 struct {
	StatusCode      int               `json:"statusCode"`
	Headers         map[string]string `json:"headers,omitempty"`
	Cookies         []string          `json:"cookies,omitempty"`
	Body            string            `json:"body"`
	IsBase64Encoded bool              `json:"isBase64Encoded"`
}

// hopHeaders are the handler's headers the integration sets itself.
var hopHeaders = []string{fasthttp.HeaderContentLength, fasthttp.HeaderConnection, fasthttp.HeaderDate, fasthttp.HeaderTransferEncoding}

// encodeResponse renders resp in the format of ev's payload version (1.0
// when the event could not be read: API Gateway reads the common fields of
// either).
func encodeResponse(ev *event, resp *fasthttp.Response, head bool) ([]byte, error) {
	body, b64 := "", false
	if !head {
		if b := resp.Body(); utf8.Valid(b) {
			body = string(b)
		} else {
			body, b64 = base64.StdEncoding.EncodeToString(b), true
		}
	}
	status := resp.StatusCode()
	if ev.v2() {
		r := responseV2{StatusCode: status, Headers: map[string]string{}, Body: body, IsBase64Encoded: b64}
		for k, v := range resp.Header.All() {
			key := string(k)
			switch {
			case slices.Contains(hopHeaders, key):
			case key == fasthttp.HeaderSetCookie:
				r.Cookies = append(r.Cookies, string(v))
			case r.Headers[key] != "":
				r.Headers[key] += ", " + string(v)
			default:
				r.Headers[key] = string(v)
			}
		}
		return json.Marshal(r)
	}
	r := responseV1{StatusCode: status, MultiValueHeaders: map[string][]string{}, Body: body, IsBase64Encoded: b64}
	for k, v := range resp.Header.All() {
		if key := string(k); !slices.Contains(hopHeaders, key) {
			r.MultiValueHeaders[key] = append(r.MultiValueHeaders[key], string(v))
		}
	}
	return json.Marshal(r)
}

// edgeConn stands for the client's connection, which ended at API Gateway
// or the function URL: the handler sees the client's address.
type edgeConn struct {
	net.Conn // nil: never read or written
	remote   net.Addr
}

func (c edgeConn) RemoteAddr() net.Addr { return c.remote }
func (c edgeConn) LocalAddr() net.Addr  { return &net.TCPAddr{} }

// tlsEdgeConn is an edgeConn for a request that came over HTTPS (as every
// function URL and API Gateway request does), so the handler builds https
// links. fasthttp recognises TLS by these two methods.
type tlsEdgeConn struct{ edgeConn }

func (tlsEdgeConn) Handshake() error { return nil }

func (tlsEdgeConn) ConnectionState() tls.ConnectionState { return tls.ConnectionState{} }

// discardLogger is the fasthttp logger of the contexts the adapter makes:
// the handler logs through its own slog.Logger.
type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
