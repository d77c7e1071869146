package shortener

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"
	"time"
)

// API keys. A key is shown once, when it is created, as a token
//
//	lgk_<id>_<secret>
//
// where id (KeyIDLength base62 characters) names the key in the store and
// in logs, and secret (KeySecretLength base62 characters, ~190 bits from
// crypto/rand) is never stored: the store keeps its SHA-256, which is
// enough for a secret that long (a slow password hash protects guessable
// secrets; this one is not guessable). Tokens are checked by looking the id
// up and comparing digests in constant time.

// Scope is what a key may do.
type Scope string

// The scopes. ScopeAdmin includes every other one, and the keys API.
const (
	ScopeCreate Scope = "links:create" // create links
	ScopeRead   Scope = "links:read"   // list links
	ScopeWrite  Scope = "links:write"  // edit and delete links
	ScopeStats  Scope = "stats:read"   // read visit statistics
	ScopeAdmin  Scope = "admin"        // everything, keys included
)

// Scopes are all scopes, in the order they are documented.
var Scopes = []Scope{ScopeCreate, ScopeRead, ScopeWrite, ScopeStats, ScopeAdmin}

// Key lengths, in base62 characters.
const (
	KeyIDLength     = 12
	KeySecretLength = 32
	keyPrefix       = "lgk_"
	// MaxKeyNameLength bounds a key's name.
	MaxKeyNameLength = 100
)

// APIKey is a stored key: everything but its secret.
type APIKey struct {
	ID        string
	Name      string   // a label for people ("ci", "marketing site")
	Hash      [32]byte // SHA-256 of the secret
	Scopes    []Scope
	CreatedAt time.Time
	LastUsed  time.Time // zero: never; kept to within a minute or so
}

// Allows reports whether the key has scope s (admin has them all).
func (k APIKey) Allows(s Scope) bool {
	return slices.Contains(k.Scopes, s) || slices.Contains(k.Scopes, ScopeAdmin)
}

// KeyStore is the Store's part that keeps API keys, in the same
// database as the links (a separate record kind). Every store passes the
// keys cases of storetest.
type KeyStore interface {
	// CreateKey stores k unless a key with its ID exists (ErrConflict).
	CreateKey(ctx context.Context, k APIKey) error
	// GetKey returns the key under id, or an error matching ErrNotFound.
	// Reads are strongly consistent where the backend offers a choice, so
	// a revoked key is gone for every instance that asks.
	GetKey(ctx context.Context, id string) (APIKey, error)
	// ListKeys returns every key, by ID.
	ListKeys(ctx context.Context) ([]APIKey, error)
	// DeleteKey removes the key under id (ErrNotFound if none).
	DeleteKey(ctx context.Context, id string) error
	// TouchKey records that the key was used at t (only ever later); a
	// missing key is not an error.
	TouchKey(ctx context.Context, id string, t time.Time) error
}

// NewAPIKey makes a key with a fresh id and secret and returns it with
// its token, which is the only place the secret appears.
func NewAPIKey(name string, scopes []Scope, now time.Time) (APIKey, string, error) {
	if err := ValidateKeyName(name); err != nil {
		return APIKey{}, "", err
	}
	scopes, err := NormalizeScopes(scopes)
	if err != nil {
		return APIKey{}, "", err
	}
	id, err := randomBase62(KeyIDLength)
	if err != nil {
		return APIKey{}, "", err
	}
	secret, err := randomBase62(KeySecretLength)
	if err != nil {
		return APIKey{}, "", err
	}
	k := APIKey{ID: id, Name: name, Hash: sha256.Sum256([]byte(secret)), Scopes: scopes, CreatedAt: now.UTC().Truncate(time.Second)}
	return k, keyPrefix + id + "_" + secret, nil
}

// ParseToken splits a token into its key id and secret; ok is false for
// anything that is not a token's shape.
func ParseToken(token string) (id, secret string, ok bool) {
	rest, found := strings.CutPrefix(token, keyPrefix)
	if !found || len(rest) != KeyIDLength+1+KeySecretLength || rest[KeyIDLength] != '_' {
		return "", "", false
	}
	id, secret = rest[:KeyIDLength], rest[KeyIDLength+1:]
	if !base62Only(id) || !base62Only(secret) {
		return "", "", false
	}
	return id, secret, true
}

// Matches reports, in constant time, whether secret is the key's.
func (k APIKey) Matches(secret string) bool {
	sum := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(sum[:], k.Hash[:]) == 1
}

// ValidKeyID reports whether id could name a key.
func ValidKeyID(id string) bool { return len(id) == KeyIDLength && base62Only(id) }

// ValidateKeyName checks a key's name: 1 to MaxKeyNameLength printable
// characters.
func ValidateKeyName(name string) error {
	if name == "" || len(name) > MaxKeyNameLength {
		return Errorf(InvalidParameter, "a key's name must be 1 to %d bytes", MaxKeyNameLength)
	}
	if err := checkChars(strings.ReplaceAll(name, " ", "_")); err != nil {
		return Errorf(InvalidParameter, "a key's name must be printable text")
	}
	return nil
}

// NormalizeScopes checks scopes and returns them sorted, each once.
func NormalizeScopes(scopes []Scope) ([]Scope, error) {
	if len(scopes) == 0 {
		return nil, Errorf(InvalidParameter, "a key needs at least one scope: %s", scopeList())
	}
	out := make([]Scope, 0, len(scopes))
	for _, s := range scopes {
		if !slices.Contains(Scopes, s) {
			return nil, Errorf(InvalidParameter, "unknown scope %q; scopes: %s", s, scopeList())
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}

func scopeList() string {
	s := make([]string, len(Scopes))
	for i, sc := range Scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ", ")
}

func base62Only(s string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(base62, s[i]) < 0 {
			return false
		}
	}
	return true
}

// randomBase62 returns n uniform base62 characters from crypto/rand.
func randomBase62(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, n+8)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("read random: %w", err)
		}
		for _, b := range buf {
			if b < 248 && len(out) < n { // 248 = 4*62: keeps b%62 uniform
				out = append(out, base62[b%62])
			}
		}
	}
	return string(out), nil
}
