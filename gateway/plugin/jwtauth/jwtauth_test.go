package jwtauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
	"github.com/linkgate/linkgate/gateway/plugin/publicapi"
)

// Tokens from APISIX 2.14's t/plugin/jwt-auth.t: key user-key, secret my-secret-key.
const (
	valid   = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrZXkiOiJ1c2VyLWtleSIsImV4cCI6MTg3OTMxODU0MX0.fNtFJnNmJgzbiYmGB0Yjvm-l6A6M4jRV1l4mnVFSYjs"
	expired = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrZXkiOiJ1c2VyLWtleSIsImV4cCI6MTU2Mzg3MDUwMX0.pPNVvh-TQsdDzorRwa-uuiLYiEBODscp9wv0cwD6c68"
)

func pemOf(t testing.TB, typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

type setup struct {
	f        *Factory
	compiled *gateway.Compiled
	api      gateway.Accessor
}

func newSetup(t testing.TB, consumers map[string]string) *setup {
	f := New()
	f.now = func() time.Time { return time.Unix(1700000000, 0) }
	res := map[string]string{}
	for name, conf := range consumers {
		res["consumers/"+name] = `{"username":"` + name + `","plugins":{"jwt-auth":` + conf + `}}`
	}
	pa := publicapi.New(f)
	reg := gateway.NewRegistry(f, pa)
	return &setup{f: f, compiled: plugintest.Compile(t, reg, res), api: plugintest.New(t, pa, `{}`).(gateway.Accessor)}
}

func (s *setup) ctx(vars map[string]string) *plugintest.Ctx {
	c := plugintest.NewCtx(vars)
	c.Compiled = s.compiled
	return c
}

func (s *setup) signed(t *testing.T, query map[string]string) (int, string) {
	t.Helper()
	vars := map[string]string{"uri": SignPath}
	for k, v := range query {
		vars["arg_"+k] = v
	}
	rep := s.api.Access(s.ctx(vars))
	return rep.Status, string(rep.Body)
}

func (s *setup) verify(t *testing.T, conf string, vars map[string]string) (gateway.Reply, *plugintest.Ctx) {
	t.Helper()
	in := plugintest.New(t, s.f, conf).(gateway.Rewriter)
	c := s.ctx(vars)
	return in.Rewrite(c), c
}

func TestVerify(t *testing.T) {
	s := newSetup(t, map[string]string{"jack": `{"key":"user-key","secret":"my-secret-key"}`})
	for _, tc := range []struct {
		name string
		vars map[string]string
		msg  string
	}{
		{"TEST 8 missing token", nil, "Missing JWT token in request"},
		{"TEST 9 invalid token", map[string]string{"arg_jwt": "invalid-" + valid}, "JWT token invalid"},
		{"TEST 10 expired", map[string]string{"arg_jwt": expired}, "failed to verify jwt"},
		{"TEST 11 header", map[string]string{"http_authorization": "Bearer " + valid}, ""},
		{"TEST 12 cookie", map[string]string{"cookie_jwt": valid}, ""},
		{"TEST 13 header without Bearer", map[string]string{"http_authorization": valid}, ""},
		{"TEST 14 bearer", map[string]string{"http_authorization": "bearer " + valid}, ""},
		{"TEST 15 invalid bearer", map[string]string{"http_authorization": "bearer invalid-" + valid}, "JWT token invalid"},
		{"TEST 21 bad signature", map[string]string{"arg_jwt": valid[:len(valid)-2] + "xx"}, "failed to verify jwt"},
		{"query", map[string]string{"arg_jwt": valid}, ""},
		{"two segments", map[string]string{"arg_jwt": "a.b"}, "JWT token invalid"},
	} {
		rep, c := s.verify(t, `{}`, tc.vars)
		if tc.msg == "" {
			if rep.Status != 0 || c.User == nil || c.User.Username != "jack" {
				t.Errorf("%s: %d %s, consumer %v", tc.name, rep.Status, rep.Body, c.User)
			}
			continue
		}
		if want := `{"message":"` + tc.msg + `"}` + "\n"; rep.Status != 401 || string(rep.Body) != want {
			t.Errorf("%s: %d %s, want 401 %s", tc.name, rep.Status, rep.Body, want)
		}
	}
	// Custom places (jwt-auth2.t).
	for _, vars := range []map[string]string{{"http_jwt_header": valid}, {"arg_jwt-query": valid}, {"cookie_jwt-cookie": valid}} {
		if rep, _ := s.verify(t, `{"header":"jwt-header","query":"jwt-query","cookie":"jwt-cookie"}`, vars); rep.Status != 0 {
			t.Errorf("custom %v: %d %s", vars, rep.Status, rep.Body)
		}
	}
}

// hs signs claims with secret as any other JWT library would.
func hs(t *testing.T, m jwt.SigningMethod, secret string, claims jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(m, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerifyClaims(t *testing.T) {
	s := newSetup(t, map[string]string{"jack": `{"key":"user-key","secret":"my-secret-key"}`})
	exp := s.f.now().Add(time.Hour).Unix()
	for name, tc := range map[string]struct {
		token, msg string
	}{
		"no key claim":    {hs(t, jwt.SigningMethodHS256, "my-secret-key", jwt.MapClaims{"exp": exp}), "missing user key in JWT token"},
		"unknown key":     {hs(t, jwt.SigningMethodHS256, "my-secret-key", jwt.MapClaims{"key": "nobody", "exp": exp}), "Invalid user key in JWT token"},
		"numeric key":     {hs(t, jwt.SigningMethodHS256, "my-secret-key", jwt.MapClaims{"key": 123, "exp": exp}), "Invalid user key in JWT token"},
		"other algorithm": {hs(t, jwt.SigningMethodHS512, "my-secret-key", jwt.MapClaims{"key": "user-key", "exp": exp}), "failed to verify jwt"},
		"not yet valid":   {hs(t, jwt.SigningMethodHS256, "my-secret-key", jwt.MapClaims{"key": "user-key", "nbf": exp}), "failed to verify jwt"},
		"no exp is fine":  {hs(t, jwt.SigningMethodHS256, "my-secret-key", jwt.MapClaims{"key": "user-key"}), ""},
		"none algorithm":  {"eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJrZXkiOiJ1c2VyLWtleSJ9.", "failed to verify jwt"},
	} {
		rep, _ := s.verify(t, `{}`, map[string]string{"arg_jwt": tc.token})
		if tc.msg == "" {
			if rep.Status != 0 {
				t.Errorf("%s: %d %s", name, rep.Status, rep.Body)
			}
		} else if want := `{"message":"` + tc.msg + `"}` + "\n"; string(rep.Body) != want {
			t.Errorf("%s: %d %s, want %s", name, rep.Status, rep.Body, want)
		}
	}
}

func TestSignAndVerify(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaPub, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPub, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	ecPriv, _ := x509.MarshalECPrivateKey(ecKey)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	s := newSetup(t, map[string]string{
		"hs256":  `{"key":"k-hs256","secret":"my-secret-key"}`,
		"hs512":  `{"key":"k-hs512","secret":"my-secret-key","algorithm":"HS512"}`,
		"b64":    `{"key":"k-b64","secret":"fo4XKdZ1xSrIZyms4q2BwPrW5lMpls9qqy5tiAk2esc=","base64_secret":true}`,
		"rs256":  `{"key":"k-rs256","algorithm":"RS256","public_key":` + q(pemOf(t, "PUBLIC KEY", rsaPub)) + `,"private_key":` + q(pemOf(t, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey))) + `}`,
		"es256":  `{"key":"k-es256","algorithm":"ES256","public_key":` + q(pemOf(t, "PUBLIC KEY", ecPub)) + `,"private_key":` + q(pemOf(t, "EC PRIVATE KEY", ecPriv)) + `}`,
		"gen":    `{"key":"k-gen"}`,
		"broken": `{"key":"k-broken","algorithm":"RS256","public_key":"not a key","private_key":"not a key"}`,
	})
	for _, key := range []string{"k-hs256", "k-hs512", "k-b64", "k-rs256", "k-es256", "k-gen"} {
		code, token := s.signed(t, map[string]string{"key": key, "payload": `{"aaa":"11","bb":"222"}`})
		if code != 200 {
			t.Fatalf("%s: sign %d %s", key, code, token)
		}
		claims := jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(token, claims); err != nil || claims["key"] != key || claims["aaa"] != "11" ||
			claims["exp"] != float64(s.f.now().Unix()+86400) {
			t.Errorf("%s: claims %v %v", key, claims, err)
		}
		if rep, c := s.verify(t, `{}`, map[string]string{"arg_jwt": token}); rep.Status != 0 || c.User == nil {
			t.Errorf("%s: verify %d %s", key, rep.Status, rep.Body)
		}
	}
	// A token for one consumer's key pair does not pass for another's.
	_, rs := s.signed(t, map[string]string{"key": "k-rs256"})
	if !strings.Contains(strings.SplitN(rs, ".", 2)[0], "eyJ") {
		t.Fatalf("token %q", rs)
	}
	for key, want := range map[string]int{"": 400, "nobody": 404, "k-broken": 500} {
		if code, body := s.signed(t, map[string]string{"key": key}); code != want {
			t.Errorf("sign key=%q: %d %q, want %d", key, code, body, want)
		}
	}
	// RS256 with unparsable keys: accepted, then every token fails.
	if rep, _ := s.verify(t, `{}`, map[string]string{"arg_jwt": hs(t, jwt.SigningMethodHS256, "x", jwt.MapClaims{"key": "k-broken"})}); rep.Status != 401 {
		t.Errorf("broken keys verify: %d", rep.Status)
	}
}

func TestConsumerSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin jwt-auth err: "
	for conf, want := range map[string]string{
		`{"key":123}`: pre + `property "key" validation failed: wrong type: expected string, got number`,
		`{"key":"k","secret":"my-secret-key","base64_secret":true}`:          pre + "base64_secret required but the secret is not in base64 format",
		`{"key":"k","algorithm":"RS256","private_key":"x"}`:                  pre + `failed to validate dependent schema for "algorithm": value should match only one schema, but matches none`,
		`{"key":"k","algorithm":"RS256","public_key":"x"}`:                   pre + `failed to validate dependent schema for "algorithm": value should match only one schema, but matches none`,
		`{"key":"k","algorithm":"ES256","public_key":"x"}`:                   "",
		`{"key":"k","algorithm":"RS256","vault":{}}`:                         pre + "vault is not supported by linkgate",
		`{"key":"k","algorithm":"PS256"}`:                                    "*",
		`{"key":"k","algorithm":"RS256","public_key":"x","private_key":"y"}`: "",
	} {
		got := plugintest.Check(t, New(), conf, true)
		if got != want && !(want == "*" && strings.HasPrefix(got, pre+`property "algorithm" validation failed: `)) {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
	// 3.x: RS256 needs a public_key only (t/plugin/jwt-auth.t TEST 24, 27, 35).
	v3 := NewWithOptions(Options{V3: true})
	for conf, want := range map[string]string{
		`{"key":"k","algorithm":"RS256","public_key":"x"}`:  "",
		`{"key":"k","algorithm":"RS256","private_key":"x"}`: pre + `failed to validate dependent schema for "algorithm": value should match only one schema, but matches none`,
	} {
		if got := plugintest.Check(t, v3, conf, true); got != want {
			t.Errorf("v3 %s:\n got %q\nwant %q", conf, got, want)
		}
	}
	// TEST 1 / 41: a secret is generated, defaults filled in.
	for _, alg := range []string{"HS256", "HS512"} {
		v, _ := gateway.DecodeJSON([]byte(`{"key":"123","algorithm":"` + alg + `"}`))
		plugins := map[string]any{Name: v}
		if err := gateway.NewRegistry(New()).Check(plugins, true); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(plugins[Name])
		if !regexp.MustCompile(`^{"algorithm":"` + alg + `","base64_secret":false,"exp":86400,"key":"123","secret":"[a-zA-Z0-9+/]+={0,2}"}$`).Match(b) {
			t.Errorf("filled in: %s", b)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	s := newSetup(b, map[string]string{"jack": `{"key":"user-key","secret":"my-secret-key"}`})
	in := plugintest.New(b, s.f, `{}`).(gateway.Rewriter)
	c := s.ctx(map[string]string{"http_authorization": "Bearer " + valid})
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		if in.Rewrite(c).Status != 0 {
			b.Fatal("rejected")
		}
	}
}
