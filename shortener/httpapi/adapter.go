package httpapi

import (
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"
)

// ServeHTTP makes the Handler an http.Handler: it copies the request (at
// most MaxBodyBytes of body) into a fasthttp.RequestCtx, runs ServeFastHTTP,
// and copies status, headers and body back. Tests, net/http servers and the
// Lambda event adapter use it; it costs a few allocations a request, so the
// linkgate server itself runs ServeFastHTTP directly.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ctx fasthttp.RequestCtx
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(r.URL.RequestURI())
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.SetHost(r.Host)
	var remote net.Addr
	if ap, err := tcpAddr(r.RemoteAddr); err == nil {
		remote = ap
	}
	ctx.Init(req, remote, nil)
	ctx.Response.Header.SetNoDefaultContentType(true) // as the server is configured
	if r.Body != nil {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		switch {
		case len(body) > MaxBodyBytes:
			HandleServerError(&ctx, fasthttp.ErrBodyTooLarge)
			writeResponse(w, &ctx.Response)
			return
		case err != nil:
			HandleServerError(&ctx, err)
			writeResponse(w, &ctx.Response)
			return
		}
		ctx.Request.SetBody(body)
	}
	h.ServeFastHTTP(&ctx)
	writeResponse(w, &ctx.Response)
}

func writeResponse(w http.ResponseWriter, resp *fasthttp.Response) {
	hdr := w.Header()
	for k, v := range resp.Header.All() {
		key := string(k)
		if key == fasthttp.HeaderContentLength || key == fasthttp.HeaderConnection || key == fasthttp.HeaderDate {
			continue // net/http sets these itself
		}
		hdr.Add(key, string(v))
	}
	body := resp.Body()
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode())
	w.Write(body)
}

func tcpAddr(s string) (net.Addr, error) {
	return net.ResolveTCPAddr("tcp", s)
}
