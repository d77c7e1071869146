package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/valyala/fasthttp"
)

// adminHandler mounts a net/http handler (the admin API) on the fasthttp
// engine. It is the boundary between fasthttp's request-scoped memory and
// code that may keep what it reads: the method, URI, headers and body are
// copied into a fresh http.Request, so an id taken from the path or a key
// from a header stays valid after the request ends. (fasthttpadaptor hands
// out views of fasthttp's reusable buffers instead: ids kept from them
// changed under the live configuration — issue 11's lost routes.)
func adminHandler(h http.Handler) fasthttp.RequestHandler {
	return func(fc *fasthttp.RequestCtx) {
		r, err := copyRequest(fc)
		if err != nil {
			fc.Error("400 Bad Request: "+err.Error(), fasthttp.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &adminWriter{fc: fc, header: http.Header{}}
		h.ServeHTTP(w, r.WithContext(ctx))
		w.WriteHeader(http.StatusOK) // no-op when the handler wrote one
	}
}

// copyRequest builds an http.Request that shares no memory with fc.
func copyRequest(fc *fasthttp.RequestCtx) (*http.Request, error) {
	uri := string(fc.RequestURI())
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, err
	}
	body := adminBody(fc)
	r := &http.Request{
		Method:        string(fc.Method()),
		URL:           u,
		RequestURI:    uri,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{},
		Host:          string(fc.Host()),
		RemoteAddr:    fc.RemoteAddr().String(),
		ContentLength: int64(len(body)),
		Body:          http.NoBody,
	}
	if !fc.Request.Header.IsHTTP11() {
		r.Proto, r.ProtoMinor = "HTTP/1.0", 0
	}
	if len(body) > 0 {
		r.Body = readCloser{bytes.NewReader(body)}
	}
	for k, v := range fc.Request.Header.All() {
		r.Header.Add(string(k), string(v))
	}
	return r, nil
}

// maxAdminBody bounds what is read of an admin request body: more than
// the admin API accepts (it answers 413), less than a client could make
// the gateway hold.
const maxAdminBody = 4 << 20

// adminBody copies at most maxAdminBody+1 bytes of the request body; a
// longer body is not read further and the connection closes after the
// answer.
func adminBody(fc *fasthttp.RequestCtx) []byte {
	if !fc.Request.IsBodyStream() {
		return bytes.Clone(fc.PostBody())
	}
	body, _ := io.ReadAll(io.LimitReader(fc.RequestBodyStream(), maxAdminBody+1))
	if len(body) > maxAdminBody {
		fc.SetConnectionClose()
	}
	return body
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// adminWriter writes a net/http response into fc.Response (which copies).
type adminWriter struct {
	fc     *fasthttp.RequestCtx
	header http.Header
	wrote  bool
}

func (w *adminWriter) Header() http.Header { return w.header }

func (w *adminWriter) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	resp := &w.fc.Response
	resp.SetStatusCode(status)
	for k, vs := range w.header {
		for _, v := range vs {
			if k == "Content-Length" {
				if _, err := strconv.Atoi(v); err == nil {
					continue // fasthttp computes it from the body
				}
			}
			resp.Header.Add(k, v)
		}
	}
}

func (w *adminWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.fc.Response.AppendBody(b)
	return len(b), nil
}
