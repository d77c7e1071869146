package httpapi

import (
	"bytes"
	"context"
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
	ID           string   `json:"id"`
	Domain       string   `json:"domain"` // the host of short_url
	ShortURL     string   `json:"short_url"`
	URL          string   `json:"url"`
	CreatedAt    *string  `json:"created_at"` // null for items without one (written by the seed's app)
	ExpiresAt    *string  `json:"expires_at"` // null: never
	MaxVisits    *int64   `json:"max_visits"` // null: unlimited
	Tags         []string `json:"tags"`
	ForwardQuery *bool    `json:"forward_query"` // null: as the server is configured (--forward-query)
}

func (h *Handler) linkJSON(ctx *fasthttp.RequestCtx, l shortener.Link) linkJSON {
	out := LinkView(l)
	out.Domain, out.ShortURL = h.domainName(ctx, l.Domain), h.shortURL(ctx, l)
	return out
}

// createRequest is the body of POST /api/v1/links.
type createRequest struct {
	URL          string   `json:"url"`
	Slug         string   `json:"slug"`
	ExpiresAt    *string  `json:"expires_at"`
	MaxVisits    *int64   `json:"max_visits"`
	Tags         []string `json:"tags"`
	ForwardQuery *bool    `json:"forward_query"`
	Domain       *string  `json:"domain"` // null or absent: the Host's
}

// decodeStrict decodes one JSON object into v: valid UTF-8, no unknown
// fields, nothing after it. Its errors are JSON problems (invalid_json).
func decodeStrict(body []byte, v any) error {
	if err := checkJSONText(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// parseExpiresAt reads an expires_at value (a create's or an edit's).
func parseExpiresAt(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, shortener.Errorf(shortener.InvalidParameter, "expires_at must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
	}
	if t.Unix() <= 0 { // the zero time (year 1) would otherwise mean "never"
		return time.Time{}, shortener.Errorf(shortener.InvalidParameter, "expires_at must be after 1970-01-01T00:00:00Z (omit it for never)")
	}
	return t, nil
}

// checkMaxVisits checks a max_visits value (a create's or an edit's).
func checkMaxVisits(n int64) error {
	if n <= 0 {
		return shortener.Errorf(shortener.InvalidParameter, "max_visits must be a positive integer (omit it, or null, for unlimited)")
	}
	return nil
}

func forwardOf(on *bool) shortener.Forward {
	switch {
	case on == nil:
		return shortener.ForwardDefault
	case *on:
		return shortener.ForwardOn
	}
	return shortener.ForwardOff
}

// decodeCreate parses a POST /api/v1/links body strictly. JSON problems
// give a plain error (invalid_json); bad field values a domain error.
// domain is the domain field, nil if absent or null.
func decodeCreate(body []byte) (out shortener.CreateRequest, domain *string, err error) {
	var req createRequest
	if err := decodeStrict(body, &req); err != nil {
		return out, nil, err
	}
	out = shortener.CreateRequest{URL: req.URL, Slug: req.Slug, Tags: req.Tags, ForwardQuery: forwardOf(req.ForwardQuery)}
	if req.ExpiresAt != nil {
		t, err := parseExpiresAt(*req.ExpiresAt)
		if err != nil {
			return shortener.CreateRequest{}, nil, err
		}
		out.ExpiresAt = t
	}
	if req.MaxVisits != nil {
		if err := checkMaxVisits(*req.MaxVisits); err != nil {
			return shortener.CreateRequest{}, nil, err
		}
		out.MaxVisits = *req.MaxVisits
	}
	return out, req.Domain, nil
}

// patchRequest is the body of PATCH /api/v1/links/{id}: the fields to
// change (JSON merge patch, RFC 7396: an absent field is unchanged, null
// resets it to its default).
type patchRequest struct {
	URL          json.RawMessage `json:"url"`
	ExpiresAt    json.RawMessage `json:"expires_at"`
	MaxVisits    json.RawMessage `json:"max_visits"`
	Tags         json.RawMessage `json:"tags"`
	ForwardQuery json.RawMessage `json:"forward_query"`
	Domain       json.RawMessage `json:"domain"` // refused: links do not move
}

// patchField decodes one field of a patch: set says it was given, null
// that it was null.
func patchField(name string, raw json.RawMessage, v any) (set, null bool, err error) {
	if raw == nil {
		return false, false, nil
	}
	if string(raw) == "null" {
		return true, true, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			te.Field = name
		}
		return true, false, err
	}
	return true, false, nil
}

// decodePatch parses a PATCH /api/v1/links/{id} body strictly, like a
// create's: JSON problems give a plain error (invalid_json), bad values a
// domain error (the Service then checks each value as a create's).
func decodePatch(body []byte) (shortener.LinkUpdate, error) {
	var req patchRequest
	if err := decodeStrict(body, &req); err != nil {
		return shortener.LinkUpdate{}, err
	}
	if req.Domain != nil {
		return shortener.LinkUpdate{}, shortener.Errorf(shortener.InvalidParameter,
			"domain cannot be edited: the short link may be printed or shared already; create a link on the other domain instead")
	}
	var u shortener.LinkUpdate
	var url string
	switch set, null, err := patchField("url", req.URL, &url); {
	case err != nil:
		return shortener.LinkUpdate{}, err
	case null:
		return shortener.LinkUpdate{}, shortener.Errorf(shortener.InvalidURL, "url cannot be null")
	case set:
		u.URL = &url
	}
	var exp string
	switch set, null, err := patchField("expires_at", req.ExpiresAt, &exp); {
	case err != nil:
		return shortener.LinkUpdate{}, err
	case null:
		u.ExpiresAt = &time.Time{}
	case set:
		t, err := parseExpiresAt(exp)
		if err != nil {
			return shortener.LinkUpdate{}, err
		}
		u.ExpiresAt = &t
	}
	var max int64
	switch set, null, err := patchField("max_visits", req.MaxVisits, &max); {
	case err != nil:
		return shortener.LinkUpdate{}, err
	case null:
		u.MaxVisits = new(int64)
	case set:
		if err := checkMaxVisits(max); err != nil {
			return shortener.LinkUpdate{}, err
		}
		u.MaxVisits = &max
	}
	var tags []string
	switch set, _, err := patchField("tags", req.Tags, &tags); {
	case err != nil:
		return shortener.LinkUpdate{}, err
	case set:
		if tags == nil {
			tags = []string{}
		}
		u.Tags = &tags
	}
	var on bool
	switch set, null, err := patchField("forward_query", req.ForwardQuery, &on); {
	case err != nil:
		return shortener.LinkUpdate{}, err
	case set:
		f := shortener.ForwardDefault
		if !null {
			f = forwardOf(&on)
		}
		u.ForwardQuery = &f
	}
	return u, nil
}

func (h *Handler) handleCreate(ctx *fasthttp.RequestCtx) {
	if !h.allowCreateRequest(ctx) {
		return
	}
	req, domain, err := decodeCreate(ctx.PostBody())
	if err != nil {
		h.writeDecodeError(ctx, err)
		return
	}
	req.Host = string(ctx.Host())
	req.Domain = h.hostDomain(ctx)
	if domain != nil {
		if req.Domain, err = h.namedDomain(ctx, *domain); err != nil {
			h.writeDomainError(ctx, err)
			return
		}
	}
	tctx, cancel := h.timeout()
	defer cancel()
	l, err := h.svc.Create(tctx, req)
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	h.metrics.created.Inc()
	ctx.Response.Header.Set("Location", linkPath(l))
	writeJSON(ctx, fasthttp.StatusCreated, h.linkJSON(ctx, l))
}

// linkPath is the API address of l.
func linkPath(l shortener.Link) string {
	if l.Domain == "" {
		return "/api/v1/links/" + l.ID
	}
	return "/api/v1/links/" + l.ID + "?domain=" + l.Domain
}

func (h *Handler) handleGet(ctx *fasthttp.RequestCtx, id []byte) {
	tctx, cancel := h.timeout()
	defer cancel()
	l, ok := h.getLink(tctx, ctx, id)
	if !ok {
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, h.linkJSON(ctx, l))
}

// getLink reads the link id names on the request's domain (?domain=),
// within tctx; when it cannot, it has written the error answer and ok is
// false.
func (h *Handler) getLink(tctx context.Context, ctx *fasthttp.RequestCtx, id []byte) (l shortener.Link, ok bool) {
	domain, ok := h.requestDomain(ctx)
	if !ok {
		return l, false
	}
	l, err := h.svc.Get(tctx, domain, string(id))
	if err != nil {
		h.writeDomainError(ctx, err)
		return l, false
	}
	return l, true
}

func (h *Handler) handlePatch(ctx *fasthttp.RequestCtx, id []byte) {
	if _, ok := h.authorize(ctx, shortener.ScopeWrite); !ok {
		return
	}
	domain, ok := h.requestDomain(ctx)
	if !ok {
		return
	}
	u, err := decodePatch(ctx.PostBody())
	if err != nil {
		h.writeDecodeError(ctx, err)
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	l, err := h.svc.Update(tctx, domain, string(id), u, string(ctx.Host()))
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
	domain, ok := h.requestDomain(ctx)
	if !ok {
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	if err := h.svc.Delete(tctx, domain, string(id)); err != nil {
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
	f, find, err := listFilter(args)
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	f.Now = h.now()
	if v := args.Peek("domain"); v != nil {
		d, err := h.namedDomain(ctx, string(v))
		if err != nil {
			h.writeDomainError(ctx, err)
			return
		}
		f.Domain, find = &d, true
	}
	tctx, cancel := h.timeout()
	defer cancel()
	var p shortener.Page
	if find {
		p, err = h.svc.Find(tctx, string(args.Peek("cursor")), limit, f)
	} else {
		p, err = h.svc.List(tctx, string(args.Peek("cursor")), limit)
	}
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	out := struct {
		Links      []linkJSON `json:"links"`
		NextCursor *string    `json:"next_cursor"`
		Scanned    int        `json:"scanned,omitempty"` // a page cut short: shortener.Page.Scanned
	}{Links: make([]linkJSON, 0, len(p.Links)), Scanned: p.Scanned}
	for _, l := range p.Links {
		out.Links = append(out.Links, h.linkJSON(ctx, l))
	}
	if p.Next != "" {
		out.NextCursor = &p.Next
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// writeDecodeError answers a body that did not decode: a domain error
// (a bad value) as such, anything else as invalid_json.
func (h *Handler) writeDecodeError(ctx *fasthttp.RequestCtx, err error) {
	var de *shortener.Error
	if errors.As(err, &de) {
		h.writeDomainError(ctx, err)
		return
	}
	writeError(ctx, fasthttp.StatusBadRequest, codeInvalidJSON, jsonErrorMessage(err))
}

// listFilter reads GET /api/v1/links's filters; find says the listing
// is filtered (or ?order=), hence newest (or oldest) first.
func listFilter(args *fasthttp.Args) (f shortener.ListFilter, find bool, err error) {
	f.Tag, f.Query = string(args.Peek("tag")), string(args.Peek("q"))
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"created_after", &f.CreatedAfter}, {"created_before", &f.CreatedBefore}} {
		v := args.Peek(b.name)
		if v == nil {
			continue
		}
		if *b.t, err = time.Parse(time.RFC3339, string(v)); err != nil {
			return f, false, shortener.Errorf(shortener.InvalidParameter, "%s must be an RFC 3339 time such as 2030-01-02T15:04:05Z", b.name)
		}
	}
	switch o := args.Peek("order"); {
	case o == nil:
	case string(o) == "newest":
		find = true
	case string(o) == "oldest":
		find, f.Oldest = true, true
	default:
		return f, false, shortener.Errorf(shortener.InvalidParameter, "order must be newest or oldest (filtered listings are newest first unless it says oldest)")
	}
	if v := args.Peek("state"); v != nil {
		f.State = shortener.LinkState(v)
	}
	return f, find || args.Has("tag") || args.Has("q") || f != shortener.ListFilter{}, nil
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
