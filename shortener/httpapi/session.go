package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// Sessions of the web page. The page signs in once with the admin key or
// an API key (POST /api/v1/session); the server keeps a session — a
// random id, what key it was opened with, a CSRF token, an absolute
// expiry — and sets the id as a cookie that scripts cannot read
// (HttpOnly), that no other site's page sends (SameSite=Strict), and that
// travels only over TLS when the page came over TLS (Secure). The key is
// not kept anywhere in the browser. Sign-out (DELETE /api/v1/session)
// forgets the session at once.
//
// A session opened with an API key is that key: its scopes are read
// again (through the keyring, so within KeyTTL) on every request, and a
// revoked key ends its sessions. A session is a cookie, which browsers
// send by themselves, so every state-changing request it authorises must
// also carry the session's CSRF token (X-CSRF-Token, or the field
// csrf_token of the no-JavaScript form): a page of another origin can
// make a browser send the cookie but cannot read the token. Requests with
// a key in Authorization or X-API-Key are not cookie-authorised and need
// no token.
//
// Sessions live in the memory of the instance that opened them (at most
// maxSessions, each at most Config.SessionTTL): a restart signs everyone
// out, and behind a load balancer with several instances the page needs
// sticky sessions (docs/serve.md).

// DefaultSessionTTL is a session's lifetime without Config.SessionTTL:
// a working day; the page then asks for the key again.
const DefaultSessionTTL = 12 * time.Hour

// DefaultSignInRate is the sign-ins each client address may try without
// Config.SignInRate: enough for typos, far too few to guess a key (a
// token's secret has ~190 bits).
var DefaultSignInRate = Rate{N: 10, Per: time.Minute}

// maxSessions bounds the sessions kept; beyond it the least recently
// opened are forgotten first (their users sign in again).
const maxSessions = 100_000

// sessionCookie is the cookie's name.
const sessionCookie = "linkgate_session"

const codeCSRF = "csrf_token_invalid"

// session is what the server keeps of a signed-in page.
type session struct {
	admin   bool   // opened with the admin key
	keyID   string // else the API key's id
	csrf    string
	expires time.Time
}

type sessions struct {
	cache *otter.Cache[[32]byte, *session]
	ttl   time.Duration
}

func newSessions(ttl time.Duration) (*sessions, error) {
	c, err := otter.New(&otter.Options[[32]byte, *session]{
		MaximumSize:      maxSessions,
		ExpiryCalculator: otter.ExpiryWriting[[32]byte, *session](ttl),
	})
	if err != nil {
		return nil, err
	}
	return &sessions{cache: c, ttl: ttl}, nil
}

// randomToken returns 32 bytes from crypto/rand, base64url.
func randomToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// open starts a session and returns its id (the cookie's value).
func (s *sessions) open(admin bool, keyID string, now time.Time) (string, *session) {
	id := randomToken()
	ss := &session{admin: admin, keyID: keyID, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.cache.Set(sha256.Sum256([]byte(id)), ss)
	return id, ss
}

// get returns the session of a cookie value, if it is open. Sessions are
// found by the SHA-256 of their id, so the lookup's timing says nothing
// about ids.
func (s *sessions) get(id []byte, now time.Time) (*session, [32]byte, bool) {
	sum := sha256.Sum256(id)
	ss, ok := s.cache.GetIfPresent(sum)
	if !ok || !now.Before(ss.expires) {
		return nil, sum, false
	}
	return ss, sum, true
}

func (s *sessions) close(sum [32]byte) { s.cache.Invalidate(sum) }

// sessionCaller returns the caller of a request that carries a session
// cookie and no key. A cookie without an open session is no caller (the
// page then asks to sign in). A state-changing request must carry the
// session's CSRF token: without it, it is answered 403 and ok is false.
func (h *Handler) sessionCaller(ctx *fasthttp.RequestCtx) (caller, bool) {
	cookie := ctx.Request.Header.Cookie(sessionCookie)
	if len(cookie) == 0 {
		return caller{}, true
	}
	ss, sum, open := h.sessions.get(cookie, h.now())
	if !open {
		return caller{}, true
	}
	if !safeMethod(ctx) && !validCSRF(ctx, ss.csrf) {
		writeError(ctx, fasthttp.StatusForbidden, codeCSRF,
			"this request is signed in by a session cookie and needs the session's CSRF token (X-CSRF-Token); reload the page")
		return caller{}, false
	}
	if ss.admin {
		if h.adminKey == nil {
			return caller{}, true
		}
		return caller{admin: true}, true
	}
	tctx, cancel := h.timeout()
	defer cancel()
	k, err := h.keys.get(tctx, ss.keyID)
	switch {
	case errors.Is(err, errBadKey): // revoked: so is the session
		h.sessions.close(sum)
		return caller{}, true
	case err != nil:
		h.writeDomainError(ctx, &shortener.Error{Code: shortener.Unavailable, Message: "could not check the session's key, retry later", Err: err})
		return caller{}, false
	}
	return caller{key: &k}, true
}

func safeMethod(ctx *fasthttp.RequestCtx) bool {
	m := ctx.Method()
	return string(m) == fasthttp.MethodGet || string(m) == fasthttp.MethodHead
}

// validCSRF reports whether the request carries token, in X-CSRF-Token or
// as the no-JavaScript form's csrf_token field.
func validCSRF(ctx *fasthttp.RequestCtx, token string) bool {
	got := ctx.Request.Header.Peek("X-CSRF-Token")
	if len(got) == 0 && bytes.HasPrefix(ctx.Request.Header.ContentType(), []byte("application/x-www-form-urlencoded")) {
		got = ctx.PostArgs().Peek("csrf_token")
	}
	return len(got) > 0 && subtle.ConstantTimeCompare(got, []byte(token)) == 1
}

// requestTLS reports whether the browser's request came over TLS: to this
// server, or to a trusted proxy that says so (X-Forwarded-Proto), or the
// server's public URL is https.
func (h *Handler) requestTLS(ctx *fasthttp.RequestCtx) bool {
	if ctx.IsTLS() || bytes.HasPrefix([]byte(h.publicURL), []byte("https://")) {
		return true
	}
	if h.cfg.TrustedProxies.Len() > 0 && h.cfg.TrustedProxies.trusted(peerAddr(ctx)) {
		return bytes.EqualFold(ctx.Request.Header.Peek("X-Forwarded-Proto"), []byte("https"))
	}
	return false
}

// setSessionCookie sets (or, with id "", clears) the session cookie.
func (h *Handler) setSessionCookie(ctx *fasthttp.RequestCtx, id string, maxAge time.Duration) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(sessionCookie)
	c.SetValue(id)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	c.SetSecure(h.requestTLS(ctx))
	if id == "" {
		c.SetMaxAge(-1) // Max-Age=0: delete it
	} else {
		c.SetMaxAge(int(maxAge / time.Second))
	}
	ctx.Response.Header.SetCookie(c)
}

// sessionJSON is GET /api/v1/session: who the page is signed in as, and
// what the server lets anyone do.
type sessionJSON struct {
	SignedIn     bool              `json:"signed_in"`
	Admin        bool              `json:"admin,omitempty"`
	KeyID        string            `json:"key_id,omitempty"`
	Name         string            `json:"name,omitempty"`
	Scopes       []shortener.Scope `json:"scopes"`
	CSRFToken    string            `json:"csrf_token,omitempty"`
	ExpiresAt    string            `json:"expires_at,omitempty"`
	CreateAccess Access            `json:"create_access"` // public: anyone may create links
	StatsPublic  bool              `json:"stats_public"`
	Keys         bool              `json:"keys"` // the server keeps API keys
}

func (h *Handler) sessionView(ss *session, name string, scopes []shortener.Scope) sessionJSON {
	out := sessionJSON{Scopes: []shortener.Scope{}, CreateAccess: h.cfg.CreateAccess, StatsPublic: h.cfg.StatsPublic, Keys: h.keys.store != nil}
	if out.CreateAccess == "" {
		out.CreateAccess = AccessPublic
	}
	if ss == nil {
		return out
	}
	out.SignedIn, out.Admin, out.KeyID, out.Name, out.CSRFToken = true, ss.admin, ss.keyID, name, ss.csrf
	out.ExpiresAt = ss.expires.UTC().Format(time.RFC3339)
	out.Scopes = scopes
	if ss.admin {
		out.Scopes = shortener.Scopes
	}
	return out
}

// handleSessionGet answers who the page is signed in as (200 either way).
func (h *Handler) handleSessionGet(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	var ss *session
	var name string
	var scopes []shortener.Scope
	if cookie := ctx.Request.Header.Cookie(sessionCookie); len(cookie) > 0 {
		if s, _, open := h.sessions.get(cookie, h.now()); open {
			c, ok := h.sessionCaller(ctx)
			if !ok {
				return
			}
			switch {
			case c.admin:
				ss, name = s, "admin key"
			case c.key != nil:
				ss, name, scopes = s, c.key.Name, c.key.Scopes
			}
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, h.sessionView(ss, name, scopes))
}

// handleSignIn opens a session for the key in the body, {"key": "…"}.
func (h *Handler) handleSignIn(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ip, _ := h.cfg.TrustedProxies.client(ctx)
	if ok, _, wait := h.signIns.take(clientKey(ip), h.now()); !ok {
		h.metrics.limited.Inc()
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(seconds(wait)))
		writeError(ctx, fasthttp.StatusTooManyRequests, codeRateLimited,
			"too many sign-ins from this address: at most "+h.signIns.rate.String()+"; retry in "+strconv.Itoa(seconds(wait))+" s")
		return
	}
	var req struct {
		Key string `json:"key"`
	}
	if err := decodeStrict(ctx.PostBody(), &req); err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, codeInvalidJSON, jsonErrorMessage(err))
		return
	}
	fail := func(reason string) {
		h.logger.LogAttrs(context.Background(), slog.LevelWarn, "sign-in failed",
			slog.String("client", ip.String()), slog.String("reason", reason))
		h.unauthorized(ctx, "the key is unknown or revoked")
	}
	if req.Key == "" {
		writeError(ctx, fasthttp.StatusBadRequest, string(shortener.InvalidParameter), "key is required: the admin key or an API key")
		return
	}
	now := h.now()
	var admin bool
	var k shortener.APIKey
	if h.adminKey != nil {
		sum := sha256.Sum256([]byte(req.Key))
		admin = subtle.ConstantTimeCompare(sum[:], h.adminKey[:]) == 1
	}
	if !admin {
		tctx, cancel := h.timeout()
		defer cancel()
		var err error
		k, err = h.keys.lookup(tctx, req.Key, now)
		switch {
		case errors.Is(err, errBadKey):
			fail("unknown or revoked key")
			return
		case err != nil:
			h.writeDomainError(ctx, &shortener.Error{Code: shortener.Unavailable, Message: "could not check the key, retry later", Err: err})
			return
		}
	}
	id, ss := h.sessions.open(admin, k.ID, now)
	h.setSessionCookie(ctx, id, h.sessions.ttl)
	name := "admin key"
	if !admin {
		name = k.Name
	}
	h.logger.LogAttrs(context.Background(), slog.LevelInfo, "signed in",
		slog.String("client", ip.String()), slog.Bool("admin", admin), slog.String("key", k.ID))
	writeJSON(ctx, fasthttp.StatusCreated, h.sessionView(ss, name, k.Scopes))
}

// handleSignOut closes the request's session (with its CSRF token) and
// clears the cookie; without a session it only clears the cookie.
func (h *Handler) handleSignOut(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if cookie := ctx.Request.Header.Cookie(sessionCookie); len(cookie) > 0 {
		if ss, sum, open := h.sessions.get(cookie, h.now()); open {
			if !validCSRF(ctx, ss.csrf) {
				writeError(ctx, fasthttp.StatusForbidden, codeCSRF, "sign-out needs the session's CSRF token (X-CSRF-Token); reload the page")
				return
			}
			h.sessions.close(sum)
		}
	}
	h.setSessionCookie(ctx, "", 0)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
