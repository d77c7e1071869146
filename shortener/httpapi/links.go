package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// REST API v1: strict JSON in (unknown fields and trailing data are
// errors), compact JSON out with a trailing newline.

// linkJSON is a link on the wire.
type linkJSON struct {
	ID        string  `json:"id"`
	ShortURL  string  `json:"short_url"`
	URL       string  `json:"url"`
	CreatedAt *string `json:"created_at"` // null for items without one (written by the seed's app)
	ExpiresAt *string `json:"expires_at"` // null: never
	MaxVisits *int64  `json:"max_visits"` // null: unlimited
}

func (h *Handler) linkJSON(ctx *fasthttp.RequestCtx, l shortener.Link) linkJSON {
	out := linkJSON{ID: l.ID, ShortURL: h.shortURL(ctx, l.ID), URL: l.URL}
	if !l.CreatedAt.IsZero() {
		s := l.CreatedAt.UTC().Format(time.RFC3339)
		out.CreatedAt = &s
	}
	if !l.ExpiresAt.IsZero() {
		s := l.ExpiresAt.UTC().Format(time.RFC3339)
		out.ExpiresAt = &s
	}
	if l.MaxVisits > 0 {
		out.MaxVisits = &l.MaxVisits
	}
	return out
}

// createRequest is the body of POST /api/v1/links.
type createRequest struct {
	URL       string  `json:"url"`
	Slug      string  `json:"slug"`
	ExpiresAt *string `json:"expires_at"`
	MaxVisits *int64  `json:"max_visits"`
}

// decodeCreate parses a POST /api/v1/links body strictly. JSON problems
// give a plain error (invalid_json); bad field values a domain error.
func decodeCreate(body []byte) (shortener.CreateRequest, error) {
	var req createRequest
	if err := checkJSONText(body); err != nil {
		return shortener.CreateRequest{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return shortener.CreateRequest{}, err
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return shortener.CreateRequest{}, errors.New("unexpected data after the JSON object")
	}
	out := shortener.CreateRequest{URL: req.URL, Slug: req.Slug}
	if req.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339, *req.ExpiresAt)
		if err != nil {
			return shortener.CreateRequest{}, shortener.Errorf(shortener.InvalidParameter, "expires_at must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
		}
		if t.Unix() <= 0 { // the zero time (year 1) would otherwise mean "never"
			return shortener.CreateRequest{}, shortener.Errorf(shortener.InvalidParameter, "expires_at must be after 1970-01-01T00:00:00Z (omit it for never)")
		}
		out.ExpiresAt = t
	}
	if req.MaxVisits != nil {
		out.MaxVisits = *req.MaxVisits
		if out.MaxVisits <= 0 {
			return shortener.CreateRequest{}, shortener.Errorf(shortener.InvalidParameter, "max_visits must be a positive integer (omit it for unlimited)")
		}
	}
	return out, nil
}

func (h *Handler) handleCreate(ctx *fasthttp.RequestCtx) {
	if !h.allowCreateRequest(ctx) {
		return
	}
	req, err := decodeCreate(ctx.PostBody())
	var de *shortener.Error
	switch {
	case errors.As(err, &de):
		h.writeDomainError(ctx, err)
		return
	case err != nil:
		writeError(ctx, fasthttp.StatusBadRequest, codeInvalidJSON, jsonErrorMessage(err))
		return
	}
	req.Host = string(ctx.Host())
	tctx, cancel := h.timeout()
	defer cancel()
	l, err := h.svc.Create(tctx, req)
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	h.metrics.created.Inc()
	ctx.Response.Header.Set("Location", "/api/v1/links/"+l.ID)
	writeJSON(ctx, fasthttp.StatusCreated, h.linkJSON(ctx, l))
}

func (h *Handler) handleGet(ctx *fasthttp.RequestCtx, id []byte) {
	tctx, cancel := h.timeout()
	defer cancel()
	l, err := h.svc.Get(tctx, string(id))
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, h.linkJSON(ctx, l))
}

func (h *Handler) handleDelete(ctx *fasthttp.RequestCtx, id []byte) {
	if _, ok := h.authorize(ctx, shortener.ScopeWrite); !ok {
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	if err := h.svc.Delete(tctx, string(id)); err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// DefaultPageSize is the page size of GET /api/v1/links without ?limit=.
const DefaultPageSize = 100

func (h *Handler) handleList(ctx *fasthttp.RequestCtx) {
	if _, ok := h.authorize(ctx, shortener.ScopeRead); !ok {
		return
	}
	args := ctx.QueryArgs()
	limit := DefaultPageSize
	if v := args.Peek("limit"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > shortener.MaxPageSize {
			writeError(ctx, fasthttp.StatusBadRequest, string(shortener.InvalidParameter),
				fmt.Sprintf("limit must be an integer from 1 to %d", shortener.MaxPageSize))
			return
		}
		limit = n
	}
	tctx, cancel := h.timeout()
	defer cancel()
	p, err := h.svc.List(tctx, string(args.Peek("cursor")), limit)
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	out := struct {
		Links      []linkJSON `json:"links"`
		NextCursor *string    `json:"next_cursor"`
	}{Links: make([]linkJSON, 0, len(p.Links))}
	for _, l := range p.Links {
		out.Links = append(out.Links, h.linkJSON(ctx, l))
	}
	if p.Next != "" {
		out.NextCursor = &p.Next
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// writeJSON writes v as compact JSON with a trailing newline.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	out, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode response: %v", err)) // a bug: recovered into a 500
	}
	ctx.Response.Header.SetContentType(contentTypeJSON)
	ctx.SetStatusCode(status)
	ctx.SetBody(append(out, '\n'))
}

// jsonErrorMessage describes a JSON decoding problem to the client.
func jsonErrorMessage(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "request body is empty; expected a JSON object"
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("field %q must be a JSON %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("expected a JSON object, not %s", te.Value)
	}
	return "invalid JSON: " + err.Error()
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int64", "int", "float64":
		return "number"
	case "ptr":
		return "value of the documented type"
	}
	return goKind
}
