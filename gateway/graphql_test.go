package gateway

import (
	"slices"
	"strings"
	"testing"
)

// TestParseGraphQL follows APISIX 3.x's t/router/graphql.t documents and
// the GraphQL grammar graphql-lua parses.
func TestParseGraphQL(t *testing.T) {
	for _, tc := range []struct {
		doc       string
		op, name  string
		fields    []string
		wantError bool
	}{
		{doc: "query repo {\n    owner {\n        name\n    }\n}", op: "query", name: "repo", fields: []string{"owner"}},
		{doc: "mutation repo($ep: Episode!, $review: ReviewInput!) {\n  createReview(episode: $ep, review: $review) {\n    stars\n    commentary\n  }\n}",
			op: "mutation", name: "repo", fields: []string{"createReview"}},
		{doc: "mutation repo($ep: Episode!) { createReview(episode: $ep) { stars } }\nquery repo { owner { name } }", op: "mutation", name: "repo", fields: []string{"createReview"}},
		{doc: "query {\n    owner {\n        name\n    }\n}", op: "query", fields: []string{"owner"}},
		{doc: "{ repo { stars } owner { name } }", op: "query", fields: []string{"repo", "owner"}},
		{doc: "query{owner{name}}", op: "query", fields: []string{"owner"}},
		{doc: `query Q($n: [Int!]! = [1, 2], $o: In = {a: "x", b: """blo"ck"""}) @d(x: 1.5e3) { a: owner(id: -4, s: "q\"s", e: ENUM, l: [$n], o: {k: null}) @include(if: true) { ...F ... on T { x } } ...G }`,
			op: "query", name: "Q", fields: []string{"owner", "G"}},
		{doc: "# comment\n, subscription S { s }", op: "subscription", name: "S", fields: []string{"s"}},
		{doc: "fragment F on T { x } query { y }", name: "F", fields: []string{"x"}},
		{doc: "AA", wantError: true},
		{doc: "", wantError: true},
		{doc: "query {}", wantError: true},
		{doc: "query { a", wantError: true},
		{doc: "query { a(x: ) }", wantError: true},
		{doc: `query { a(s: "unterminated) }`, wantError: true},
		{doc: "query { a } }", wantError: true},
		{doc: "query { a(n: 1.) }", wantError: true},
		{doc: "{ a(n: 12abc) }", wantError: true},
		{doc: "query ($v: Int = $w) { a }", wantError: true}, // a default value is constant
		{doc: strings.Repeat("{ a ", 100) + strings.Repeat("}", 100), wantError: true},
	} {
		g, err := ParseGraphQL([]byte(tc.doc), nil)
		if tc.wantError {
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", tc.doc, g)
			}
			continue
		}
		if err != nil || g.Operation != tc.op || g.Name != tc.name || !slices.Equal(g.RootFields, tc.fields) {
			t.Errorf("%q: %+v %v, want %s %q %q", tc.doc, g, err, tc.op, tc.name, tc.fields)
		}
	}
}

// FuzzParseGraphQL: no input panics or loops, and a document that parses
// still parses with its ignored tokens (commas, comments) doubled.
func FuzzParseGraphQL(f *testing.F) {
	for _, s := range []string{"query repo { owner { name } }", "{ a(x: [1, {b: \"c\"}]) @d { ...F } }", "fragment F on T { x }", `{ a(s: """x""") }`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		g, err := ParseGraphQL([]byte(doc), nil)
		if err != nil || strings.ContainsAny(doc, "\"#") {
			return
		}
		g2, err := ParseGraphQL([]byte(strings.ReplaceAll(doc, ",", ",,")), nil)
		if err != nil || g2.Operation != g.Operation || g2.Name != g.Name || !slices.Equal(g2.RootFields, g.RootFields) {
			t.Fatalf("%q: %+v, with commas doubled %+v %v", doc, g, g2, err)
		}
	})
}

type listVars map[string][]string

func (l listVars) Var(string) string { return "" }
func (l listVars) VarList(name string) ([]string, bool, bool) {
	v, ok := l[name]
	return v, name == "graphql_root_fields", ok
}

// TestGraphQLVars: graphql_* variables as lua-resty-expr sees them: an
// anonymous operation's name is "" (not nil), root fields are a table
// that only "has" looks into, and a request without a document has nil.
func TestGraphQLVars(t *testing.T) {
	doc := listVars{"graphql_operation": {"query"}, "graphql_name": {""}, "graphql_root_fields": {"repo", "owner"}}
	for _, tc := range []struct {
		rules   string
		vars    listVars
		matches bool
	}{
		{`[["graphql_operation","==","query"],["graphql_name","==",""]]`, doc, true},
		{`[["graphql_name","==","repo"]]`, doc, false},
		{`[["graphql_root_fields","has","owner"]]`, doc, true},
		{`[["graphql_root_fields","has","stars"]]`, doc, false},
		{`[["graphql_root_fields","!","has","stars"]]`, doc, true},
		{`[["graphql_root_fields","==","owner"]]`, doc, false},
		{`[["graphql_root_fields","~=","owner"]]`, doc, true},
		{`[["graphql_name","==",""]]`, listVars{}, false},
		{`[["graphql_root_fields","has","owner"]]`, listVars{}, false},
		{`[["graphql_name","==",null]]`, listVars{}, true},
	} {
		v, err := DecodeJSON([]byte(tc.rules))
		if err != nil {
			t.Fatal(err)
		}
		e, err := ParseVars(v.([]any))
		if err != nil {
			t.Fatalf("%s: %v", tc.rules, err)
		}
		if got := e.Eval(tc.vars); got != tc.matches {
			t.Errorf("%s on %v: %v, want %v", tc.rules, tc.vars, got, tc.matches)
		}
	}
}
