package gateway

import "testing"

// The keywords plugin schemas use beyond the resource schemas: if/then/else
// (limit-count's policies), minProperties, and number enums (gzip's
// http_version), with the wording of APISIX's validator.
func TestSchemaConditionalKeywords(t *testing.T) {
	s := &Schema{Type: "object", Properties: map[string]*Schema{
		"policy":  {Type: "string", Default: "local"},
		"version": {Enum: []any{1.1, 1.0}},
	}, MinProperties: 1,
		If:   &Schema{Properties: map[string]*Schema{"policy": {Enum: []any{"redis"}}}},
		Then: &Schema{Required: []string{"host"}, Properties: map[string]*Schema{"port": {Type: "integer", Default: 6379}}},
		Else: &Schema{If: &Schema{Properties: map[string]*Schema{"policy": {Enum: []any{"cluster"}}}}, Then: &Schema{Required: []string{"nodes"}}},
	}
	for _, tc := range []struct {
		doc, err string
		port     bool
	}{
		{doc: `{"policy":"redis","host":"h"}`, port: true},
		{doc: `{"policy":"redis"}`, err: "then clause did not match", port: true}, // as jsonschema: defaults go in before the required check fails
		{doc: `{"policy":"cluster"}`, err: "else clause did not match"},
		{doc: `{"policy":"cluster","nodes":[]}`},
		{doc: `{"policy":"local"}`},
		{doc: `{"version":1.0}`},
		{doc: `{"version":1.1}`},
		{doc: `{"version":2}`, err: "*"}, // any error: the enum wording is the resource schemas' business
		{doc: `{}`},                      // the default fills policy in
	} {
		v, err := DecodeJSON([]byte(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := s.Validate(v); err != nil {
			got = err.Error()
		}
		if got != tc.err && !(tc.err == "*" && got != "") {
			t.Errorf("%s: error %q, want %q", tc.doc, got, tc.err)
		}
		if _, ok := v.(map[string]any)["port"]; ok != tc.port {
			t.Errorf("%s: then's default filled in: %v, want %v", tc.doc, ok, tc.port)
		}
	}
	empty := &Schema{Type: "object", MinProperties: 1}
	if err := empty.Validate(map[string]any{}); err == nil || err.Error() != "expect object to have at least 1 properties" {
		t.Errorf("minProperties: %v", err)
	}
}

func TestSchemaDependencies(t *testing.T) {
	s := &Schema{Type: "object", Properties: map[string]*Schema{"alg": {Type: "string", Default: "HS256"}},
		Dependencies: map[string]*Schema{"alg": {OneOf: []*Schema{
			{Properties: map[string]*Schema{"alg": {Enum: []any{"HS256"}}}},
			{Properties: map[string]*Schema{"alg": {Enum: []any{"RS256"}}}, Required: []string{"public_key"}},
		}}}}
	for doc, want := range map[string]string{
		`{}`:                               "",
		`{"alg":"RS256","public_key":"k"}`: "",
		`{"alg":"RS256"}`:                  `failed to validate dependent schema for "alg": value should match only one schema, but matches none`,
	} {
		v, _ := DecodeJSON([]byte(doc))
		got := ""
		if err := s.Validate(v); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s: %q, want %q", doc, got, want)
		}
	}
}
