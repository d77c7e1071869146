package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// The keys API (scope admin). A key's token is in the answer of its
// create only; the store keeps its SHA-256.

// keyJSON is a key on the wire.
type keyJSON struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Scopes    []shortener.Scope `json:"scopes"`
	CreatedAt string            `json:"created_at"`
	LastUsed  *string           `json:"last_used"` // null: never; to within a minute
	Token     string            `json:"token,omitempty"`
}

func keyView(k shortener.APIKey) keyJSON {
	out := keyJSON{ID: k.ID, Name: k.Name, Scopes: k.Scopes, CreatedAt: k.CreatedAt.UTC().Format(time.RFC3339)}
	if !k.LastUsed.IsZero() {
		s := k.LastUsed.UTC().Format(time.RFC3339)
		out.LastUsed = &s
	}
	return out
}

// keysStore returns the store of keys, or answers 403 when there is none.
func (h *Handler) keysStore(ctx *fasthttp.RequestCtx) (shortener.KeyStore, bool) {
	if _, ok := h.authorize(ctx, shortener.ScopeAdmin); !ok {
		return nil, false
	}
	if h.keys.store == nil {
		writeError(ctx, fasthttp.StatusForbidden, codeForbidden, "this store keeps no API keys")
		return nil, false
	}
	return h.keys.store, true
}

func (h *Handler) handleKeysCreate(ctx *fasthttp.RequestCtx) {
	ks, ok := h.keysStore(ctx)
	if !ok {
		return
	}
	var req struct {
		Name   string            `json:"name"`
		Scopes []shortener.Scope `json:"scopes"`
	}
	body := ctx.PostBody()
	err := checkJSONText(body)
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err = dec.Decode(&req); err == nil && dec.Decode(&struct{}{}) != io.EOF {
			err = errors.New("unexpected data after the JSON object")
		}
	}
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, codeInvalidJSON, jsonErrorMessage(err))
		return
	}
	k, token, err := shortener.NewAPIKey(req.Name, req.Scopes, h.now())
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	if err := ks.CreateKey(tctx, k); err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	out := keyView(k)
	out.Token = token
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("Location", "/api/v1/keys/"+k.ID)
	writeJSON(ctx, fasthttp.StatusCreated, out)
}

func (h *Handler) handleKeysList(ctx *fasthttp.RequestCtx) {
	ks, ok := h.keysStore(ctx)
	if !ok {
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	keys, err := ks.ListKeys(tctx)
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	out := struct {
		Keys []keyJSON `json:"keys"`
	}{Keys: make([]keyJSON, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, keyView(k))
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func (h *Handler) handleKeysDelete(ctx *fasthttp.RequestCtx, id []byte) {
	ks, ok := h.keysStore(ctx)
	if !ok {
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	if err := ks.DeleteKey(tctx, string(id)); err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	h.keys.forget(string(id))
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
