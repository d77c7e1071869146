package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// The seed's routes keep its wire format (docs: research/shortener.md,
// cases C1–C24): bodies indented with four spaces and no trailing newline,
// Content-Type application/json; charset=utf-8, encoding/json's HTML
// escaping, case-insensitive keys, any request Content-Type, only the first
// JSON value of the body read. Its bugs are fixed on purpose (README,
// "Differences from the sample app"): invalid URLs get 400, unknown ids
// 404, store failures 503, each with a JSON error body.

const contentTypeJSON = "application/json; charset=utf-8"

// seedLink is the seed's DynamoLinkItem, fields in its order.
type seedLink struct {
	ShortURL    string `json:"shortURL"`
	OriginalURL string `json:"originalURL"`
}

// decodeSeedCreate reads a /shortenURL body as the seed's gin BindJSON
// does: the first JSON value, into a struct with an OriginalURL string.
func decodeSeedCreate(body []byte) (string, error) {
	var req struct{ OriginalURL string }
	if err := checkJSONText(body); err != nil {
		return "", err
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		return "", err
	}
	return req.OriginalURL, nil
}

func (h *Handler) handleShortenURL(ctx *fasthttp.RequestCtx) {
	if !h.allowCreateRequest(ctx) {
		return
	}
	raw, err := decodeSeedCreate(ctx.PostBody())
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, codeInvalidJSON, jsonErrorMessage(err))
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	l, err := h.svc.Create(tctx, shortener.CreateRequest{URL: raw, Host: string(ctx.Host()), Domain: h.hostDomain(ctx)})
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	h.metrics.created.Inc()
	out, _ := json.MarshalIndent(seedLink{ShortURL: l.ID, OriginalURL: l.URL}, "", "    ")
	ctx.Response.Header.SetContentType(contentTypeJSON)
	ctx.SetStatusCode(fasthttp.StatusCreated)
	ctx.SetBody(out)
}

func (h *Handler) handleGetFullURL(ctx *fasthttp.RequestCtx, id []byte) {
	tctx, cancel := h.timeout()
	defer cancel()
	l, err := h.svc.Resolve(tctx, h.hostDomain(ctx), string(id))
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	out, _ := json.Marshal(l.URL)
	ctx.Response.Header.SetContentType(contentTypeJSON)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(out)
}
