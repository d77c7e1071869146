package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// Wire error codes of the HTTP layer itself; domain codes (invalid_url,
// not_found, expired, …) are used as they are, except Conflict, which is
// slug_taken on the wire.
const (
	codeInvalidJSON          = "invalid_json"
	codePayloadTooLarge      = "payload_too_large"
	codeHeaderTooLarge       = "header_too_large"
	codeRequestTimeout       = "request_timeout"
	codeUnsupportedMediaType = "unsupported_media_type"
	codeBadRequest           = "bad_request"
	codeUnauthorized         = "unauthorized"
	codeForbidden            = "forbidden"
	codeMethodNotAllowed     = "method_not_allowed"
	codeOverloaded           = "overloaded"
	codeRateLimited          = "rate_limited"
	codeMisdirected          = "misdirected_request"
	codeNotFound             = string(shortener.NotFound)
	codeSlugTaken            = "slug_taken"
	codeImportRunning        = "import_running"
	codeNotStreamable        = "not_streamable"
)

// errorBody is every error's JSON: {"error":{"code":"…","message":"…"}}.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError writes a JSON error answer.
func writeError(ctx *fasthttp.RequestCtx, status int, code, message string) {
	writeErrorBody(ctx, status, errorJSON(code, message))
}

// errorJSON is the body of an error answer.
func errorJSON(code, message string) []byte {
	var b errorBody
	b.Error.Code, b.Error.Message = code, message
	out, _ := json.Marshal(b)
	return append(out, '\n')
}

// writeErrorBody writes an error answer whose body is errorJSON's (copied).
func writeErrorBody(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.Response.Header.SetContentTypeBytes(mimeJSONUTF8)
	ctx.SetStatusCode(status)
	if status == fasthttp.StatusServiceUnavailable {
		ctx.Response.Header.SetCanonical(headerRetryAfter, retryAfterOne)
	}
	ctx.SetBody(body)
}

var (
	mimeJSONUTF8     = []byte(contentTypeJSON)
	headerRetryAfter = []byte("Retry-After")
	retryAfterOne    = []byte("1")
	// overloadedBody answers shed requests without allocating: a flood's
	// refusals should cost the server as little as they cost the client.
	overloadedBody = errorJSON(codeOverloaded, "too many requests in flight, retry later")
)

// statusOf maps a domain error to its HTTP status and wire code: the one
// place where domain errors meet HTTP.
func statusOf(err error) (int, string) {
	switch c := shortener.ErrorCode(err); c {
	case shortener.NotFound:
		return fasthttp.StatusNotFound, string(c)
	case shortener.Conflict:
		return fasthttp.StatusConflict, codeSlugTaken
	case shortener.Expired:
		return fasthttp.StatusGone, string(c)
	case shortener.InvalidURL, shortener.URLTooLong, shortener.SchemeNotAllowed, shortener.SelfReference,
		shortener.BlockedDomain, shortener.InvalidSlug, shortener.InvalidParameter:
		return fasthttp.StatusBadRequest, string(c)
	case shortener.Unavailable:
		return fasthttp.StatusServiceUnavailable, string(c)
	default:
		return fasthttp.StatusInternalServerError, string(shortener.Internal)
	}
}

// writeDomainError answers err and logs server-side failures (once, here).
func (h *Handler) writeDomainError(ctx *fasthttp.RequestCtx, err error) {
	status, code := statusOf(err)
	if status >= 500 {
		ip, _ := h.cfg.TrustedProxies.client(ctx)
		h.logger.LogAttrs(ctx, slog.LevelError, "request failed",
			slog.String("method", string(ctx.Method())), slog.String("path", string(ctx.Path())),
			slog.String("client", ip.String()), slog.Int("status", status), slog.String("error", err.Error()))
	}
	writeError(ctx, status, code, shortener.ErrorMessage(err))
}

// HandleServerError answers requests the server could not read: a body
// over the limit (413), headers over the limit (431), a request not read
// within the read timeout (408), malformed HTTP (400).
// It is the fasthttp server's ErrorHandler.
func HandleServerError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		writeError(ctx, fasthttp.StatusRequestEntityTooLarge, codePayloadTooLarge, "request body larger than 8 KiB")
	case errors.As(err, &small):
		writeError(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, codeHeaderTooLarge, "request headers too large")
	case errors.As(err, &netErr) && netErr.Timeout():
		writeError(ctx, fasthttp.StatusRequestTimeout, codeRequestTimeout, "request not received within the read timeout")
	default:
		writeError(ctx, fasthttp.StatusBadRequest, codeBadRequest, "malformed HTTP request")
	}
	ctx.SetConnectionClose()
}
