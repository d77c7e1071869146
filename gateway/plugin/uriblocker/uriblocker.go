// Package uriblocker is APISIX's uri-blocker plugin: a request whose URI
// matches one of the block rules (PCRE patterns, run with RE2 through
// nginxre) is rejected with rejected_code.
//
// As APISIX since 2.11, the rules see the normalized URI ($uri, with "."
// and ".." segments resolved and percent-escapes decoded) followed by
// "?" and the raw query string, not the request line's URI as sent: a
// client cannot slip past "^/internal/" with "/./internal/".
package uriblocker

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp/syntax"
	"strings"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/nginxre"
)

// Name and Priority as APISIX.
const (
	Name     = "uri-blocker"
	Priority = 2900
)

// Factory makes uri-blocker instances.
type Factory struct{}

var (
	_ gateway.Factory     = (*Factory)(nil)
	_ gateway.ConfChecker = (*Factory)(nil)
	_ gateway.Rewriter    = (*instance)(nil)
)

// New returns the plugin factory.
func New() *Factory { return &Factory{} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"block_rules":      {Type: "array", Items: &gateway.Schema{Type: "string", MinLength: 1, MaxLength: 4096}, UniqueItems: true},
	"rejected_code":    {Type: "integer", Minimum: gateway.Num(200), Default: 403},
	"rejected_msg":     {Type: "string", MinLength: 1},
	"case_insensitive": {Type: "boolean", Default: false},
}, Required: []string{"block_rules"}}

// Schema is APISIX 3.x's.
func (*Factory) Schema() *gateway.Schema { return schema }

// CheckConf compiles every rule on its own, as APISIX does, and words a
// failure as its pcre_compile() error.
func (*Factory) CheckConf(c map[string]any) error {
	list, _ := c["block_rules"].([]any)
	for _, v := range list {
		rule, _ := v.(string)
		if _, err := nginxre.Compile(rule, "j"); err != nil {
			return fmt.Errorf("pcre_compile() failed: %s in %q", pcreMessage(err), rule)
		}
	}
	return nil
}

// pcreMessage is PCRE's wording of the syntax errors RE2 and PCRE share;
// RE2's own wording otherwise (a pattern RE2 refuses and PCRE takes, such
// as a backreference, is refused with RE2's reason).
func pcreMessage(err error) string {
	var se *syntax.Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	switch se.Code {
	case syntax.ErrMissingParen:
		return "missing )"
	case syntax.ErrUnexpectedParen:
		return "unmatched parentheses"
	case syntax.ErrMissingBracket:
		return "missing terminating ] for character class"
	case syntax.ErrMissingRepeatArgument:
		return "nothing to repeat"
	case syntax.ErrTrailingBackslash:
		return "\\ at end of pattern"
	}
	return se.Code.String() + ": " + se.Expr
}

type instance struct {
	re       *nginxre.Regexp
	rejected gateway.Reply
}

// New builds an instance: the rules joined into one alternation, as
// APISIX's block_rules_concat.
func (*Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		BlockRules      []string `json:"block_rules"`
		RejectedCode    int      `json:"rejected_code"`
		RejectedMsg     *string  `json:"rejected_msg"`
		CaseInsensitive bool     `json:"case_insensitive"`
	}
	c.RejectedCode = 403
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	opts := "jo"
	if c.CaseInsensitive {
		opts += "i"
	}
	re, err := nginxre.Compile(strings.Join(c.BlockRules, "|"), opts)
	if err != nil {
		return nil, err
	}
	in := &instance{re: re, rejected: gateway.Reply{Status: c.RejectedCode}}
	if c.RejectedMsg != nil {
		in.rejected = gateway.JSONReply(c.RejectedCode, "error_msg", *c.RejectedMsg)
	}
	return in, nil
}

// Rewrite rejects a request whose normalized URI and query match a rule.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	uri, args := c.Var("uri"), c.Var("args")
	n := len(uri)
	if args != "" {
		n += 1 + len(args)
	}
	b := c.Buffer(n)[:0]
	b = append(b, uri...)
	if args != "" {
		b = append(b, '?')
		b = append(b, args...)
	}
	if in.re.Match(b) {
		return in.rejected
	}
	return gateway.Reply{}
}
