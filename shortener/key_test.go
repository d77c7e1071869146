package shortener_test

import (
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

func TestAPIKeyTokens(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 700, time.UTC)
	k, token, err := shortener.NewAPIKey("ci", []shortener.Scope{shortener.ScopeWrite, shortener.ScopeCreate, shortener.ScopeCreate}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, "lgk_"+k.ID+"_") || len(token) != 4+12+1+32 || !k.CreatedAt.Equal(now.Truncate(time.Second)) {
		t.Fatalf("key %+v, token %q", k, token)
	}
	if strings.Contains(strings.Join([]string{k.ID, k.Name}, ""), token[17:]) {
		t.Fatal("the secret is kept in the key")
	}
	id, secret, ok := shortener.ParseToken(token)
	if !ok || id != k.ID || !k.Matches(secret) || k.Matches(otherLast(secret)) || k.Matches("") {
		t.Fatalf("ParseToken(%q) = %q, %q, %v; matching wrong", token, id, secret, ok)
	}
	if got := k.Scopes; len(got) != 2 || got[0] != shortener.ScopeCreate || got[1] != shortener.ScopeWrite {
		t.Errorf("scopes %v: want sorted, each once", got)
	}
	if !k.Allows(shortener.ScopeCreate) || k.Allows(shortener.ScopeStats) || k.Allows(shortener.ScopeAdmin) {
		t.Error("Allows wrong for a create+write key")
	}
	admin := shortener.APIKey{Scopes: []shortener.Scope{shortener.ScopeAdmin}}
	for _, s := range shortener.Scopes {
		if !admin.Allows(s) {
			t.Errorf("admin does not allow %s", s)
		}
	}
	for _, bad := range []string{"", token[1:], token + "x", "lgk_" + k.ID + "-" + secret, "lgk_" + k.ID[:11] + "!_" + secret, "Bearer " + token, strings.Replace(token, "lgk_", "lgx_", 1)} {
		if _, _, ok := shortener.ParseToken(bad); ok {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
	for _, tt := range []struct {
		name   string
		scopes []shortener.Scope
	}{{"", []shortener.Scope{shortener.ScopeAdmin}}, {strings.Repeat("n", 101), []shortener.Scope{shortener.ScopeAdmin}}, {"x\ny", []shortener.Scope{shortener.ScopeAdmin}}, {"ok", nil}, {"ok", []shortener.Scope{"links:all"}}} {
		if _, _, err := shortener.NewAPIKey(tt.name, tt.scopes, now); shortener.ErrorCode(err) != shortener.InvalidParameter {
			t.Errorf("NewAPIKey(%q, %v) = %v, want invalid_parameter", tt.name, tt.scopes, err)
		}
	}
	k2, _, _ := shortener.NewAPIKey("other name", []shortener.Scope{shortener.ScopeRead}, now)
	if k2.ID == k.ID || !shortener.ValidKeyID(k2.ID) || shortener.ValidKeyID("short") {
		t.Error("key ids not fresh or not valid")
	}
}

// otherLast is secret with its last character changed: appending a fixed
// one would give the secret back whenever it already ends with it (1 in 62).
func otherLast(secret string) string {
	last := byte('x')
	if secret[len(secret)-1] == last {
		last = 'y'
	}
	return secret[:len(secret)-1] + string(last)
}
