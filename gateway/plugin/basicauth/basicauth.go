// Package basicauth is APISIX's basic-auth plugin: a consumer is
// identified by the username and password of an Authorization: Basic
// header, checked in constant time.
package basicauth

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "basic-auth"
	Priority = 2520
)

// Factory makes basic-auth instances.
type Factory struct{ v3 bool }

// Options configure the factory.
type Options struct {
	// V3 takes the scheme in any case ("basic", "BASIC"), as APISIX 3.x;
	// 2.14 wanted "Basic".
	V3 bool
}

var (
	_ gateway.Factory       = (*Factory)(nil)
	_ gateway.Authenticator = (*Factory)(nil)
	_ gateway.AuthPreparer  = (*Factory)(nil)
)

// New returns the plugin factory, with 2.14's rules.
func New() *Factory { return &Factory{} }

// NewWithOptions returns the plugin factory configured by o.
func NewWithOptions(o Options) *Factory { return &Factory{v3: o.V3} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var (
	schema = &gateway.Schema{Type: "object", Title: "work with route or service object", Properties: map[string]*gateway.Schema{
		"hide_credentials": {Type: "boolean", Default: false},
	}}
	consumerSchema = &gateway.Schema{Type: "object", Title: "work with consumer object", Required: []string{"username", "password"}, Properties: map[string]*gateway.Schema{
		"username": {Type: "string"},
		"password": {Type: "string"},
	}}
)

// Schema is the route-side configuration: {hide_credentials}.
func (*Factory) Schema() *gateway.Schema { return schema }

// ConsumerSchema is the consumer-side configuration: {username, password}.
func (*Factory) ConsumerSchema() *gateway.Schema { return consumerSchema }

type consumerConf struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Credential is the consumer's username.
func (*Factory) Credential(raw json.RawMessage) (string, error) {
	var c consumerConf
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return "", err
	}
	if c.Username == "" {
		return "", errors.New("basic-auth: empty username")
	}
	return c.Username, nil
}

// PrepareConsumer keeps the consumer's password.
func (*Factory) PrepareConsumer(raw json.RawMessage) (any, error) {
	var c consumerConf
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return []byte(c.Password), nil
}

type instance struct{ hide, anyCase bool }

var (
	missing        = gateway.JSONReply(401, "message", "Missing authorization in request")
	invalidHeader  = gateway.JSONReply(401, "message", "Invalid authorization in request")
	invalidUser    = gateway.JSONReply(401, "message", "Invalid user authorization")
	authenticateAs = "Basic realm='.'"
)

// New builds an instance.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		Hide bool `json:"hide_credentials"`
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &instance{hide: c.Hide, anyCase: f.v3}, nil
}

// Rewrite authenticates the request.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	auth := c.Var("http_authorization")
	if auth == "" {
		c.SetResponseHeader("WWW-Authenticate", authenticateAs)
		return missing
	}
	user, pass, ok := parse(c.Buffer(base64.StdEncoding.DecodedLen(len(auth))), auth, in.anyCase)
	if !ok {
		return invalidHeader
	}
	con := c.LookupConsumer(Name, b2s(user))
	if con == nil {
		return invalidUser
	}
	want, _ := con.AuthData(Name).([]byte)
	if subtle.ConstantTimeCompare(want, pass) != 1 {
		return invalidUser
	}
	if in.hide {
		c.SetUpstreamHeader("Authorization", "")
	}
	c.SetConsumer(con)
	return gateway.Reply{}
}

// Parse reads the username and password of an Authorization header as
// APISIX does: "Basic" and a whitespace character anywhere, then base64
// (padding optional) of "user:password", whose whitespace is removed; a
// password stops at its first ':'. buf holds the decoded bytes.
func Parse(buf []byte, header string) (user, pass []byte, ok bool) {
	return parse(buf, header, false)
}

// parse is Parse, with the scheme in any case when anyCase (3.x's
// "(?i:basic)\\s(.+)").
func parse(buf []byte, header string, anyCase bool) (user, pass []byte, ok bool) {
	i := indexBasic(header, anyCase)
	if i < 0 || i+6 >= len(header) {
		return nil, nil, false
	}
	enc := header[i+6:]
	n, err := base64.StdEncoding.Decode(buf, unsafe.Slice(unsafe.StringData(enc), len(enc)))
	if err != nil {
		n, err = base64.RawStdEncoding.Decode(buf, unsafe.Slice(unsafe.StringData(enc), len(enc)))
		if err != nil {
			return nil, nil, false
		}
	}
	dec := buf[:n]
	j := strings.IndexByte(b2s(dec), ':')
	if j < 0 {
		return nil, nil, false
	}
	user, pass = dec[:j], dec[j+1:]
	if k := strings.IndexByte(b2s(pass), ':'); k >= 0 {
		pass = pass[:k]
	}
	return stripSpace(user), stripSpace(pass), true
}

// indexBasic finds "Basic" (in any case when anyCase) followed by a
// whitespace character (PCRE \s).
func indexBasic(h string, anyCase bool) int {
	for off := 0; ; {
		i := strings.Index(h[off:], "Basic")
		if anyCase {
			i = indexFold(h[off:], "basic")
		}
		if i < 0 {
			return -1
		}
		i += off
		if i+5 < len(h) && isSpace(h[i+5]) {
			return i
		}
		off = i + 1
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// stripSpace removes whitespace in place.
func stripSpace(b []byte) []byte {
	out := b[:0]
	for _, c := range b {
		if !isSpace(c) {
			out = append(out, c)
		}
	}
	return out
}

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// indexFold is strings.Index of the lowercase ASCII word w in h, in
// any ASCII case.
func indexFold(h, w string) int {
next:
	for i := 0; i+len(w) <= len(h); i++ {
		for j := range len(w) {
			if c := h[i+j]; c != w[j] && c|0x20 != w[j] {
				continue next
			}
		}
		return i
	}
	return -1
}
