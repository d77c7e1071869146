package gateway

import (
	"errors"
	"fmt"
)

// GraphQL is what APISIX's graphql_* route variables read from a request's
// GraphQL document: its first definition's operation type ("query" for
// the shorthand "{…}", "" for a fragment), its name ("" when anonymous)
// and the names of its root fields (aliases are not names).
type GraphQL struct {
	Operation  string
	Name       string
	RootFields []string
}

// maxGraphQLDepth bounds the nesting the parser follows (selection sets,
// lists, objects, types), so a hostile document cannot exhaust the stack.
const maxGraphQLDepth = 64

var errGraphQLDepth = errors.New("graphql: nested too deeply")

// ParseGraphQL parses doc as a GraphQL executable document (operations and
// fragments, as the graphql-lua parser APISIX uses) and returns its first
// definition; fields is reused for the root fields. A document that does
// not parse, or holds no definition, is an error.
func ParseGraphQL(doc []byte, fields []string) (GraphQL, error) {
	p := gqlParser{src: doc}
	p.next()
	var first GraphQL
	n := 0
	for p.tok != gqlEOF {
		var g GraphQL
		if n == 0 {
			g.RootFields = fields[:0]
		}
		if err := p.definition(&g, n == 0); err != nil {
			return GraphQL{}, err
		}
		if n == 0 {
			first = g
		}
		n++
	}
	if p.err != nil {
		return GraphQL{}, p.err
	}
	if n == 0 {
		return GraphQL{}, errors.New("graphql: empty document")
	}
	return first, nil
}

type gqlTok uint8

const (
	gqlEOF gqlTok = iota
	gqlPunct
	gqlName
	gqlNumber
	gqlString
	gqlBad
)

type gqlParser struct {
	src   []byte
	pos   int
	tok   gqlTok
	val   string // the token's text (a punctuator, a name)
	err   error
	depth int
}

// next reads the next token, skipping whitespace, commas and comments.
func (p *gqlParser) next() {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			p.pos++
			continue
		case c == 0xEF && p.pos+2 < len(p.src) && p.src[p.pos+1] == 0xBB && p.src[p.pos+2] == 0xBF: // BOM
			p.pos += 3
			continue
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
			continue
		}
		break
	}
	if p.pos >= len(p.src) {
		p.tok, p.val = gqlEOF, ""
		return
	}
	start := p.pos
	c := p.src[p.pos]
	switch {
	case c == '.':
		if p.pos+2 < len(p.src) && p.src[p.pos+1] == '.' && p.src[p.pos+2] == '.' {
			p.pos += 3
			p.tok, p.val = gqlPunct, "..."
			return
		}
	case c == '!' || c == '$' || c == '&' || c == '(' || c == ')' || c == ':' || c == '=' || c == '@' || c == '[' || c == ']' || c == '{' || c == '|' || c == '}':
		p.pos++
		p.tok, p.val = gqlPunct, string(c)
		return
	case c == '_' || isLetter(c):
		for p.pos < len(p.src) && (p.src[p.pos] == '_' || isLetter(p.src[p.pos]) || isDigit(p.src[p.pos])) {
			p.pos++
		}
		p.tok, p.val = gqlName, string(p.src[start:p.pos])
		return
	case c == '-' || isDigit(c):
		if p.number() {
			p.tok, p.val = gqlNumber, ""
			return
		}
	case c == '"':
		if p.str() {
			p.tok, p.val = gqlString, ""
			return
		}
	}
	p.tok, p.val = gqlBad, ""
	if p.err == nil {
		p.err = fmt.Errorf("graphql: unexpected character %q at %d", c, start)
	}
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// number reads -?int(.digits)?([eE][+-]?digits)?.
func (p *gqlParser) number() bool {
	if p.src[p.pos] == '-' {
		p.pos++
	}
	digits := func() bool {
		s := p.pos
		for p.pos < len(p.src) && isDigit(p.src[p.pos]) {
			p.pos++
		}
		return p.pos > s
	}
	if !digits() {
		return false
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		if !digits() {
			return false
		}
	}
	if p.pos < len(p.src) && p.src[p.pos]|0x20 == 'e' {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if !digits() {
			return false
		}
	}
	return p.pos >= len(p.src) || !(p.src[p.pos] == '_' || p.src[p.pos] == '.' || isLetter(p.src[p.pos]))
}

// str reads a "string" (escapes skipped over, no line breaks) or a
// """block string""".
func (p *gqlParser) str() bool {
	if p.pos+2 < len(p.src) && p.src[p.pos+1] == '"' && p.src[p.pos+2] == '"' {
		p.pos += 3
		for p.pos+2 < len(p.src) {
			switch {
			case p.src[p.pos] == '\\' && p.pos+3 < len(p.src) && string(p.src[p.pos+1:p.pos+4]) == `"""`:
				p.pos += 4
			case string(p.src[p.pos:p.pos+3]) == `"""`:
				p.pos += 3
				return true
			default:
				p.pos++
			}
		}
		return false
	}
	p.pos++
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case '"':
			p.pos++
			return true
		case '\\':
			p.pos += 2
		case '\n', '\r':
			return false
		default:
			p.pos++
		}
	}
	return false
}

func (p *gqlParser) fail(what string) error {
	if p.err == nil {
		p.err = fmt.Errorf("graphql: expected %s at %d", what, p.pos)
	}
	return p.err
}

// expect consumes the punctuator s.
func (p *gqlParser) expect(s string) error {
	if p.tok != gqlPunct || p.val != s {
		return p.fail(`"` + s + `"`)
	}
	p.next()
	return p.err
}

func (p *gqlParser) is(s string) bool { return p.tok == gqlPunct && p.val == s }

func (p *gqlParser) name() (string, error) {
	if p.tok != gqlName {
		return "", p.fail("a name")
	}
	n := p.val
	p.next()
	return n, p.err
}

func (p *gqlParser) enter() error {
	p.depth++
	if p.depth > maxGraphQLDepth {
		p.err = errGraphQLDepth
	}
	return p.err
}

// definition parses an operation or a fragment; root fields are recorded
// for the first only.
func (p *gqlParser) definition(g *GraphQL, first bool) error {
	switch {
	case p.is("{"):
		g.Operation = "query"
	case p.tok == gqlName && (p.val == "query" || p.val == "mutation" || p.val == "subscription"):
		g.Operation = p.val
		p.next()
		if p.tok == gqlName {
			g.Name = p.val
			p.next()
		}
		if p.is("(") {
			if err := p.variableDefinitions(); err != nil {
				return err
			}
		}
		if err := p.directives(); err != nil {
			return err
		}
	case p.tok == gqlName && p.val == "fragment":
		p.next()
		if p.tok != gqlName || p.val == "on" {
			return p.fail("a fragment name")
		}
		g.Name = p.val
		p.next()
		if p.tok != gqlName || p.val != "on" {
			return p.fail(`"on"`)
		}
		p.next()
		if _, err := p.name(); err != nil {
			return err
		}
		if err := p.directives(); err != nil {
			return err
		}
	default:
		return p.fail("a definition")
	}
	var fields *[]string
	if first {
		fields = &g.RootFields
	}
	return p.selectionSet(fields)
}

func (p *gqlParser) variableDefinitions() error {
	if err := p.expect("("); err != nil {
		return err
	}
	for {
		if err := p.expect("$"); err != nil {
			return err
		}
		if _, err := p.name(); err != nil {
			return err
		}
		if err := p.expect(":"); err != nil {
			return err
		}
		if err := p.typeRef(); err != nil {
			return err
		}
		if p.is("=") {
			p.next()
			if err := p.value(true); err != nil {
				return err
			}
		}
		if err := p.directives(); err != nil {
			return err
		}
		if p.is(")") {
			p.next()
			return p.err
		}
	}
}

func (p *gqlParser) typeRef() error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	if p.is("[") {
		p.next()
		if err := p.typeRef(); err != nil {
			return err
		}
		if err := p.expect("]"); err != nil {
			return err
		}
	} else if _, err := p.name(); err != nil {
		return err
	}
	if p.is("!") {
		p.next()
	}
	return p.err
}

func (p *gqlParser) directives() error {
	for p.is("@") {
		p.next()
		if _, err := p.name(); err != nil {
			return err
		}
		if p.is("(") {
			if err := p.arguments(); err != nil {
				return err
			}
		}
	}
	return p.err
}

func (p *gqlParser) arguments() error {
	if err := p.expect("("); err != nil {
		return err
	}
	for {
		if _, err := p.name(); err != nil {
			return err
		}
		if err := p.expect(":"); err != nil {
			return err
		}
		if err := p.value(false); err != nil {
			return err
		}
		if p.is(")") {
			p.next()
			return p.err
		}
	}
}

// value parses a value; constant ones (default values) take no variable.
func (p *gqlParser) value(constant bool) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	switch {
	case p.is("$") && !constant:
		p.next()
		_, err := p.name()
		return err
	case p.tok == gqlNumber || p.tok == gqlString || p.tok == gqlName:
		p.next()
		return p.err
	case p.is("["):
		p.next()
		for !p.is("]") {
			if err := p.value(constant); err != nil {
				return err
			}
		}
		p.next()
		return p.err
	case p.is("{"):
		p.next()
		for !p.is("}") {
			if _, err := p.name(); err != nil {
				return err
			}
			if err := p.expect(":"); err != nil {
				return err
			}
			if err := p.value(constant); err != nil {
				return err
			}
		}
		p.next()
		return p.err
	}
	return p.fail("a value")
}

// selectionSet parses {selection…}, appending root field names to fields
// when it is not nil.
func (p *gqlParser) selectionSet(fields *[]string) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer func() { p.depth-- }()
	if err := p.expect("{"); err != nil {
		return err
	}
	for {
		if err := p.selection(fields); err != nil {
			return err
		}
		if p.is("}") {
			p.next()
			return p.err
		}
	}
}

func (p *gqlParser) selection(fields *[]string) error {
	if p.is("...") {
		p.next()
		if p.tok == gqlName && p.val != "on" { // a fragment spread: its name, as graphql-lua's f.name
			if fields != nil {
				*fields = append(*fields, p.val)
			}
			p.next()
			return p.directives()
		}
		if p.tok == gqlName { // inline fragment: on Type
			p.next()
			if _, err := p.name(); err != nil {
				return err
			}
		}
		if err := p.directives(); err != nil {
			return err
		}
		return p.selectionSet(nil)
	}
	name, err := p.name()
	if err != nil {
		return err
	}
	if p.is(":") { // an alias: the field's name follows
		p.next()
		if name, err = p.name(); err != nil {
			return err
		}
	}
	if fields != nil {
		*fields = append(*fields, name)
	}
	if p.is("(") {
		if err := p.arguments(); err != nil {
			return err
		}
	}
	if err := p.directives(); err != nil {
		return err
	}
	if p.is("{") {
		return p.selectionSet(nil)
	}
	return p.err
}
