// Package jwtauth is APISIX's jwt-auth plugin: a consumer is identified by
// the "key" claim of a JSON Web Token sent in a header, query argument or
// cookie, and the token must be signed with that consumer's secret (HS256,
// HS512) or key pair (RS256, and ES256 as APISIX 3.x). Tokens are parsed,
// signed and verified by github.com/golang-jwt/jwt/v5, never by hand. The
// consumer's algorithm is enforced: a token cannot pick another one.
//
// jwt-auth also offers /apisix/plugin/jwt/sign (exposed by public-api).
package jwtauth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/linkgate/linkgate/gateway"
)

// Name, Priority and the sign API's path as APISIX.
const (
	Name     = "jwt-auth"
	Priority = 2510
	SignPath = "/apisix/plugin/jwt/sign"
)

// Factory makes jwt-auth instances.
type Factory struct {
	now func() time.Time
	v3  bool
}

// Options configure the factory.
type Options struct {
	// V3 checks consumers as APISIX 3.x: RS256 needs a public_key only
	// (2.14 wanted the private_key too).
	V3 bool
}

var (
	_ gateway.Factory         = (*Factory)(nil)
	_ gateway.Authenticator   = (*Factory)(nil)
	_ gateway.ConsumerChecker = (*Factory)(nil)
	_ gateway.AuthPreparer    = (*Factory)(nil)
	_ gateway.APIProvider     = (*Factory)(nil)
)

// New returns the plugin factory.
func New() *Factory { return &Factory{now: time.Now} }

// NewWithOptions returns the plugin factory configured by o.
func NewWithOptions(o Options) *Factory { return &Factory{now: time.Now, v3: o.V3} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var (
	schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
		"header": {Type: "string", Default: "authorization"},
		"query":  {Type: "string", Default: "jwt"},
		"cookie": {Type: "string", Default: "jwt"},
	}}
	keyPair = func(alg string, required ...string) *gateway.Schema {
		return &gateway.Schema{Required: required, Properties: map[string]*gateway.Schema{
			"public_key":  {Type: "string"},
			"private_key": {Type: "string"},
			"algorithm":   {Enum: []any{alg}},
		}}
	}
	consumerSchemaOf = func(rs256 *gateway.Schema) *gateway.Schema {
		return &gateway.Schema{Type: "object", Required: []string{"key"}, Properties: map[string]*gateway.Schema{
			"key":           {Type: "string"},
			"secret":        {Type: "string"},
			"algorithm":     {Type: "string", Enum: []any{"HS256", "HS512", "RS256", "ES256"}, Default: "HS256"},
			"exp":           {Type: "integer", Minimum: gateway.Num(1), Default: 86400},
			"base64_secret": {Type: "boolean", Default: false},
			"vault":         {Type: "object", Properties: map[string]*gateway.Schema{}},
		}, Dependencies: map[string]*gateway.Schema{"algorithm": {OneOf: []*gateway.Schema{
			{Properties: map[string]*gateway.Schema{"algorithm": {Enum: []any{"HS256", "HS512"}, Default: "HS256"}}},
			rs256,
			{Required: []string{"vault"}, Properties: map[string]*gateway.Schema{
				"vault":     {Type: "object", Properties: map[string]*gateway.Schema{}},
				"algorithm": {Enum: []any{"RS256"}},
			}},
			keyPair("ES256", "public_key"),
		}}}}
	}
	consumerSchema   = consumerSchemaOf(keyPair("RS256", "public_key", "private_key"))
	consumerSchemaV3 = consumerSchemaOf(keyPair("RS256", "public_key"))
)

// Schema is the route-side configuration: where the token is.
func (*Factory) Schema() *gateway.Schema { return schema }

// ConsumerSchema is the consumer-side configuration: APISIX 2.14's, plus
// ES256 (public_key required, private_key only for the sign API); under
// v3 RS256 is as ES256.
func (f *Factory) ConsumerSchema() *gateway.Schema {
	if f.v3 {
		return consumerSchemaV3
	}
	return consumerSchema
}

// CheckConsumerConf fills a random secret in for HMAC without one and
// checks what the schema cannot, with APISIX's messages.
func (f *Factory) CheckConsumerConf(c map[string]any) error {
	if _, ok := c["vault"]; ok {
		return gateway.Unsupported("vault is not supported by linkgate")
	}
	alg, _ := c["algorithm"].(string)
	secret, hasSecret := c["secret"].(string)
	switch {
	case alg != "RS256" && alg != "ES256" && !hasSecret:
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		c["secret"] = base64.StdEncoding.EncodeToString(b)
	case c["base64_secret"] == true:
		if _, err := base64.StdEncoding.DecodeString(secret); err != nil {
			return errors.New("base64_secret required but the secret is not in base64 format")
		}
	}
	if alg == "RS256" {
		if _, ok := c["public_key"]; !ok {
			return errors.New("missing valid public key")
		}
		if _, ok := c["private_key"]; !ok && !f.v3 {
			return errors.New("missing valid private key")
		}
	}
	return nil
}

type consumerConf struct {
	Key          string `json:"key"`
	Secret       string `json:"secret"`
	Algorithm    string `json:"algorithm"`
	Exp          int64  `json:"exp"`
	Base64Secret bool   `json:"base64_secret"`
	PublicKey    string `json:"public_key"`
	PrivateKey   string `json:"private_key"`
}

// Credential is the consumer's key.
func (*Factory) Credential(raw json.RawMessage) (string, error) {
	var c consumerConf
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return "", err
	}
	if c.Key == "" {
		return "", errors.New("jwt-auth: empty key")
	}
	return c.Key, nil
}

// consumer is a consumer's keys, parsed once. A key that does not parse is
// nil: as in APISIX the consumer is accepted, and verifying (401) or
// signing (500) with it fails.
type consumer struct {
	key       string
	method    jwt.SigningMethod
	verifyKey any
	signKey   any
	publicPEM string
	exp       time.Duration
}

// PrepareConsumer parses the consumer's secret or keys.
func (*Factory) PrepareConsumer(raw json.RawMessage) (any, error) {
	c := consumerConf{Algorithm: "HS256", Exp: 86400}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	con := &consumer{key: c.Key, method: jwt.GetSigningMethod(c.Algorithm), exp: time.Duration(c.Exp) * time.Second, publicPEM: c.PublicKey}
	if con.method == nil {
		return nil, fmt.Errorf("jwt-auth: unknown algorithm %q", c.Algorithm)
	}
	switch c.Algorithm {
	case "RS256":
		if k, err := jwt.ParseRSAPublicKeyFromPEM([]byte(c.PublicKey)); err == nil {
			con.verifyKey = k
		}
		if k, err := jwt.ParseRSAPrivateKeyFromPEM([]byte(c.PrivateKey)); err == nil {
			con.signKey = k
		}
	case "ES256":
		if k, err := jwt.ParseECPublicKeyFromPEM([]byte(c.PublicKey)); err == nil {
			con.verifyKey = k
		}
		if k, err := jwt.ParseECPrivateKeyFromPEM([]byte(c.PrivateKey)); err == nil {
			con.signKey = k
		}
	default:
		secret := []byte(c.Secret)
		if c.Base64Secret {
			b, err := base64.StdEncoding.DecodeString(c.Secret)
			if err != nil {
				return nil, errors.New("base64_secret required but the secret is not in base64 format")
			}
			secret = b
		}
		con.verifyKey, con.signKey = secret, secret
	}
	return con, nil
}

type instance struct {
	f                   *Factory
	headerVar, queryVar string
	cookieVar           string
	parser              *jwt.Parser
}

var (
	missingToken = gateway.JSONReply(401, "message", "Missing JWT token in request")
	invalidToken = gateway.JSONReply(401, "message", "JWT token invalid")
	missingKey   = gateway.JSONReply(401, "message", "missing user key in JWT token")
	unknownKey   = gateway.JSONReply(401, "message", "Invalid user key in JWT token")
	notVerified  = gateway.JSONReply(401, "message", "failed to verify jwt")

	errMissingKey = errors.New("missing user key in JWT token")
	errUnknownKey = errors.New("invalid user key in JWT token")
	errAlgorithm  = errors.New("token algorithm is not the consumer's")
	errNoKey      = errors.New("the consumer's key did not parse")
)

func varName(prefix, name string) string {
	return prefix + strings.ReplaceAll(strings.ToLower(name), "-", "_")
}

// New builds an instance.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	c := struct {
		Header string `json:"header"`
		Query  string `json:"query"`
		Cookie string `json:"cookie"`
	}{Header: "authorization", Query: "jwt", Cookie: "jwt"}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &instance{f: f, headerVar: varName("http_", c.Header), queryVar: "arg_" + c.Query, cookieVar: "cookie_" + c.Cookie,
		parser: jwt.NewParser(jwt.WithTimeFunc(func() time.Time { return f.now() }))}, nil
}

// token finds the token: header (without "Bearer "), query, cookie.
func (in *instance) token(c gateway.Ctx) string {
	if t := c.Var(in.headerVar); t != "" {
		if strings.HasPrefix(t, "Bearer ") || strings.HasPrefix(t, "bearer ") {
			return t[7:]
		}
		return t
	}
	if t := c.Var(in.queryVar); t != "" {
		return t
	}
	return c.Var(in.cookieVar)
}

// Rewrite authenticates the request.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	raw := in.token(c)
	if raw == "" {
		return missingToken
	}
	var con *gateway.ConsumerEntry
	_, err := in.parser.Parse(raw, func(t *jwt.Token) (any, error) {
		key, present := t.Claims.(jwt.MapClaims)["key"]
		if !present || key == nil {
			return nil, errMissingKey
		}
		s, _ := key.(string)
		if con = c.LookupConsumer(Name, s); con == nil || s == "" {
			return nil, errUnknownKey
		}
		data, _ := con.AuthData(Name).(*consumer)
		switch {
		case data == nil || data.verifyKey == nil:
			return nil, errNoKey
		case t.Method.Alg() != data.method.Alg():
			return nil, errAlgorithm
		}
		return data.verifyKey, nil
	})
	switch {
	case err == nil:
		c.SetConsumer(con)
		return gateway.Reply{}
	case errors.Is(err, jwt.ErrTokenMalformed):
		return invalidToken
	case errors.Is(err, errMissingKey):
		return missingKey
	case errors.Is(err, errUnknownKey):
		return unknownKey
	}
	return notVerified
}

// APIs is the sign endpoint: GET /apisix/plugin/jwt/sign?key=K[&payload=JSON].
func (f *Factory) APIs() []gateway.API {
	return []gateway.API{{Method: "GET", Path: SignPath, Serve: f.sign}}
}

var (
	badRequest = gateway.Reply{Status: 400}
	notFound   = gateway.Reply{Status: 404}
	signFailed = gateway.Reply{Status: 500, Body: []byte("failed to sign jwt"), ContentType: "text/plain; charset=utf-8"}
)

// sign issues a token for a consumer: {key, exp} plus the payload's claims.
func (f *Factory) sign(c gateway.Ctx) gateway.Reply {
	key := c.Var("arg_key")
	if key == "" {
		return badRequest
	}
	ce := c.LookupConsumer(Name, key)
	if ce == nil {
		return notFound
	}
	con, _ := ce.AuthData(Name).(*consumer)
	if con == nil {
		return notFound
	}
	claims := jwt.MapClaims{"key": strings.Clone(key), "exp": f.now().Add(con.exp).Unix()}
	if p := c.Var("arg_payload"); p != "" {
		var extra map[string]any
		if err := json.Unmarshal([]byte(p), &extra); err != nil {
			return signFailed
		}
		for k, v := range extra {
			claims[k] = v
		}
	}
	t := jwt.NewWithClaims(con.method, claims)
	if con.method.Alg() == "RS256" {
		t.Header["x5c"] = []string{con.publicPEM}
	}
	if con.signKey == nil {
		return signFailed
	}
	s, err := t.SignedString(con.signKey)
	if err != nil {
		return signFailed
	}
	return gateway.Reply{Status: 200, Body: []byte(s), ContentType: "text/plain; charset=utf-8"}
}
