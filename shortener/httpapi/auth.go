package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"sync"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// Access control. A request names its key in "Authorization: Bearer KEY"
// or "X-API-Key: KEY": the --admin-key (every scope), or an API key
// (shortener.APIKey) with scopes. Keys are read from the store at most
// once a KeyTTL (a second) per key and instance, misses too, so a key
// revoked anywhere is refused everywhere within a second; secrets are
// compared as SHA-256 digests in constant time. A key's last use is
// written at most once a minute per instance, in the background.

// Access names who may create links.
type Access string

const (
	AccessPublic Access = "public" // anyone (the default: a local install, the seed's commands)
	AccessKey    Access = "key"    // requests with a key of scope links:create
)

// KeyTTL is how long a key read from the store is believed.
const KeyTTL = time.Second

// touchEvery is how often a key's last use is written, per instance.
const touchEvery = time.Minute

// caller is who sent a request: nobody (no key), the admin key, or an API
// key.
type caller struct {
	key   *shortener.APIKey // nil: the admin key or none
	admin bool
}

func (c caller) id() string {
	if c.key != nil {
		return c.key.ID
	}
	return ""
}

func (c caller) allows(s shortener.Scope) bool { return c.admin || c.key != nil && c.key.Allows(s) }

type keyEntry struct {
	key   shortener.APIKey
	found bool
}

// keyring checks keys against the store.
type keyring struct {
	store   shortener.KeyStore // nil: no API keys
	cache   *otter.Cache[string, keyEntry]
	mu      sync.Mutex
	touched map[string]time.Time // when this instance last wrote a key's last use
	touches chan struct{}        // bounds the writes in flight
}

func newKeyring(store shortener.KeyStore) (*keyring, error) {
	r := &keyring{store: store, touched: map[string]time.Time{}, touches: make(chan struct{}, 4)}
	c, err := otter.New(&otter.Options[string, keyEntry]{
		MaximumSize:      10_000,
		ExpiryCalculator: otter.ExpiryWriting[string, keyEntry](KeyTTL),
	})
	if err != nil {
		return nil, err
	}
	r.cache = c
	return r, nil
}

var errBadKey = errors.New("unknown or revoked key")

// lookup returns the key of a token whose secret matches.
func (r *keyring) lookup(ctx context.Context, token string, now time.Time) (shortener.APIKey, error) {
	id, secret, ok := shortener.ParseToken(token)
	if !ok || r.store == nil {
		return shortener.APIKey{}, errBadKey
	}
	k, err := r.get(ctx, id)
	if err != nil {
		return shortener.APIKey{}, err
	}
	if !k.Matches(secret) {
		return shortener.APIKey{}, errBadKey
	}
	r.touch(id, now)
	return k, nil
}

// get returns the key under id as the store had it at most KeyTTL ago;
// errBadKey if there is none.
func (r *keyring) get(ctx context.Context, id string) (shortener.APIKey, error) {
	if r.store == nil {
		return shortener.APIKey{}, errBadKey
	}
	e, err := r.cache.Get(ctx, id, otter.LoaderFunc[string, keyEntry](func(ctx context.Context, id string) (keyEntry, error) {
		k, err := r.store.GetKey(ctx, id)
		switch {
		case errors.Is(err, shortener.ErrNotFound):
			return keyEntry{}, nil
		case err != nil:
			return keyEntry{}, err
		}
		return keyEntry{key: k, found: true}, nil
	}))
	if err != nil {
		return shortener.APIKey{}, err
	}
	if !e.found {
		return shortener.APIKey{}, errBadKey
	}
	return e.key, nil
}

// forget drops a key this instance revoked, at once.
func (r *keyring) forget(id string) { r.cache.Invalidate(id) }

// touch writes the key's last use in the background, at most once every
// touchEvery per key, and never more than cap(touches) at once.
func (r *keyring) touch(id string, now time.Time) {
	r.mu.Lock()
	if last, ok := r.touched[id]; ok && now.Sub(last) < touchEvery {
		r.mu.Unlock()
		return
	}
	if len(r.touched) > 10_000 {
		clear(r.touched)
	}
	r.touched[id] = now
	r.mu.Unlock()
	select {
	case r.touches <- struct{}{}:
	default:
		return // busy: a later use writes it
	}
	go func() {
		defer func() { <-r.touches }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.store.TouchKey(ctx, id, now)
	}()
}

// requestToken returns the key a request carries, if any.
func requestToken(ctx *fasthttp.RequestCtx) []byte {
	if auth := ctx.Request.Header.Peek("Authorization"); len(auth) > 7 && bytes.EqualFold(auth[:7], []byte("Bearer ")) {
		return bytes.TrimSpace(auth[7:])
	}
	return ctx.Request.Header.Peek("X-API-Key")
}

// identify returns who sent the request; a key that is given but wrong is
// answered 401 (and ok is false), a store that does not answer 503.
func (h *Handler) identify(ctx *fasthttp.RequestCtx) (caller, bool) {
	token := requestToken(ctx)
	if len(token) == 0 {
		return h.sessionCaller(ctx) // the web page's session, if any (session.go)
	}
	if h.adminKey != nil {
		sum := sha256.Sum256(token)
		if subtle.ConstantTimeCompare(sum[:], h.adminKey[:]) == 1 {
			return caller{admin: true}, true
		}
	}
	tctx, cancel := h.timeout()
	defer cancel()
	k, err := h.keys.lookup(tctx, string(token), h.now())
	switch {
	case errors.Is(err, errBadKey):
		h.unauthorized(ctx, "the key is unknown or revoked")
		return caller{}, false
	case err != nil:
		h.writeDomainError(ctx, &shortener.Error{Code: shortener.Unavailable, Message: "could not check the key, retry later", Err: err})
		return caller{}, false
	}
	return caller{key: &k}, true
}

// authorize admits a request whose key has scope s: 401 without a valid
// key, 403 for a key without the scope. Without an admin key and a store
// of keys, such routes are off (403).
func (h *Handler) authorize(ctx *fasthttp.RequestCtx, s shortener.Scope) (caller, bool) {
	if h.adminKey == nil && h.keys.store == nil {
		writeError(ctx, fasthttp.StatusForbidden, codeForbidden, "this route needs a key, and the server has none: start it with --admin-key or on a store that keeps API keys")
		return caller{}, false
	}
	c, ok := h.identify(ctx)
	switch {
	case !ok:
		return caller{}, false
	case !c.admin && c.key == nil:
		h.unauthorized(ctx, "a key with scope "+string(s)+" is required (Authorization: Bearer <key> or X-API-Key, or sign in on the web page)")
		return caller{}, false
	case !c.allows(s):
		writeError(ctx, fasthttp.StatusForbidden, codeForbidden, "the key "+c.id()+" lacks the scope "+string(s))
		return caller{}, false
	}
	return c, true
}

func (h *Handler) unauthorized(ctx *fasthttp.RequestCtx, msg string) {
	ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="linkgate"`)
	writeError(ctx, fasthttp.StatusUnauthorized, codeUnauthorized, msg)
}

// allowCreateRequest admits a create: anyone with --create-access public
// (a key given is still checked, and then limits by key), only keys with
// links:create with key. It applies the create rate limits.
func (h *Handler) allowCreateRequest(ctx *fasthttp.RequestCtx) bool {
	var c caller
	var ok bool
	if h.cfg.CreateAccess == AccessKey {
		c, ok = h.authorize(ctx, shortener.ScopeCreate)
	} else {
		c, ok = h.identify(ctx)
	}
	if !ok {
		return false
	}
	if c.admin {
		return h.allowCreate(ctx, "admin")
	}
	return h.allowCreate(ctx, c.id())
}
