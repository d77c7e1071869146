// Package gzip is APISIX's gzip plugin: responses of the configured
// content types, at least min_length long, are gzip-compressed for clients
// that accept it, with github.com/klauspost/compress. As nginx's gzip
// filter, which APISIX switches on: only 200, 403 and 404 responses with
// a body and no Content-Encoding of their own, and a strong ETag becomes
// weak. Compressing needs the whole body: the instance is a
// gateway.BodyEncoder, which runs after every other body rewrite.
package gzip

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	kgzip "github.com/klauspost/compress/gzip"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "gzip"
	Priority = 995
)

// Factory makes gzip instances; it keeps the compressors, one pool per level.
type Factory struct {
	pools [10]sync.Pool // by compression level 1-9
}

var _ gateway.Factory = (*Factory)(nil)

// New returns the plugin factory.
func New() *Factory { return &Factory{} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"types": {AnyOf: []*gateway.Schema{
		{Type: "array", MinItems: 1, Items: &gateway.Schema{Type: "string", MinLength: 1}},
		{Enum: []any{"*"}},
	}, Default: []any{"text/html"}},
	"min_length":   {Type: "integer", Minimum: gateway.Num(1), Default: 20},
	"comp_level":   {Type: "integer", Minimum: gateway.Num(1), Maximum: gateway.Num(9), Default: 1},
	"http_version": {Enum: []any{1.1, 1.0}, Default: 1.1},
	"buffers": {Type: "object", Default: map[string]any{"number": 32, "size": 4096}, Properties: map[string]*gateway.Schema{
		"number": {Type: "integer", Minimum: gateway.Num(1), Default: 32},
		"size":   {Type: "integer", Minimum: gateway.Num(1), Default: 4096},
	}},
	"vary": {Type: "boolean"},
}}

// Schema is APISIX 2.14's. buffers (nginx's gzip_buffers) is accepted and
// has no use here.
func (*Factory) Schema() *gateway.Schema { return schema }

type instance struct {
	f         *Factory
	anyType   bool
	types     []string
	minLength int
	level     int
	http10    bool // http_version 1.0: HTTP/1.0 clients too
	vary      bool
}

// New builds an instance.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	c := struct {
		Types       json.RawMessage `json:"types"`
		MinLength   int             `json:"min_length"`
		CompLevel   int             `json:"comp_level"`
		HTTPVersion float64         `json:"http_version"`
		Vary        bool            `json:"vary"`
	}{MinLength: 20, CompLevel: 1, HTTPVersion: 1.1}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{f: f, types: []string{"text/html"}, minLength: c.MinLength, level: min(max(c.CompLevel, 1), 9),
		http10: c.HTTPVersion < 1.1, vary: c.Vary}
	if len(c.Types) > 0 {
		if string(c.Types) == `"*"` {
			in.anyType = true
		} else if err := json.Unmarshal(c.Types, &in.types); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// FilterHeaders decides whether to compress, as nginx's gzip filter.
func (in *instance) FilterHeaders(c gateway.Ctx) {
	switch c.Status() {
	case 200, 403, 404:
	default:
		return
	}
	if c.Var("request_method") == "HEAD" || c.ResponseHeader("Content-Encoding") != "" || !AcceptsGzip(c.Var("http_accept_encoding")) {
		return
	}
	if !in.http10 && c.Var("server_protocol") == "HTTP/1.0" {
		return
	}
	ct := c.ResponseHeader("Content-Type")
	if ct == "" {
		return // as nginx: no Content-Type, no compression
	}
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if !in.anyType && !matchType(in.types, ct) {
		return
	}
	if cl := c.ResponseHeader("Content-Length"); cl != "" {
		if n, err := strconv.Atoi(cl); err == nil && n < in.minLength {
			return
		}
	}
	c.SetValue(in, 1)
	c.SetResponseHeader("Content-Encoding", "gzip")
	c.SetResponseHeader("Content-Length", "")
	if etag := c.ResponseHeader("ETag"); strings.HasPrefix(etag, `"`) {
		c.SetResponseHeader("ETag", "W/"+etag)
	}
	if in.vary {
		c.AddResponseHeader("Vary", "Accept-Encoding")
	}
}

func matchType(types []string, ct string) bool {
	for _, t := range types {
		if t == ct {
			return true
		}
	}
	return false
}

// compressor is a pooled gzip writer and the buffer it writes to.
type compressor struct {
	w   *kgzip.Writer
	out appender
}

type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// EncodeBody compresses the body when the header filter decided to.
func (in *instance) EncodeBody(c gateway.Ctx, dst, body []byte) []byte {
	if _, ok := c.Value(in); !ok {
		return body
	}
	p := &in.f.pools[in.level]
	z, _ := p.Get().(*compressor)
	if z == nil {
		z = &compressor{}
		z.w, _ = kgzip.NewWriterLevel(&z.out, in.level)
	}
	z.out.b = dst[:0]
	z.w.Reset(&z.out)
	_, _ = z.w.Write(body)
	_ = z.w.Close()
	out := z.out.b
	z.out.b = nil
	p.Put(z)
	return out
}

// AcceptsGzip reports whether an Accept-Encoding header allows gzip: a
// "gzip" coding whose q is not 0.
func AcceptsGzip(h string) bool {
	for h != "" {
		var part string
		part, h, _ = strings.Cut(h, ",")
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q == 0 {
					return false
				}
			}
		}
		return true
	}
	return false
}
