package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Schema is a small JSON Schema subset: the keywords APISIX 2.14's schemas
// use. Validate follows APISIX's validator (api7/jsonschema 0.9.8, which
// compiles a schema to Lua): the same order of checks and the same
// wording, including Lua's view of JSON (arrays and objects are both
// "table", an empty {} or [] is both an object and an array, every number
// is a "number"), so admin API errors read like APISIX's byte for byte.
// It injects defaults into the objects it walks, as APISIX stores them.
// MarshalJSON renders the schema as JSON Schema (the admin schema API).
type Schema struct {
	Type       string             // object, array, string, integer, number, boolean; "" accepts any
	Properties map[string]*Schema // object properties
	Required   []string
	// NoAdditional forbids properties not in Properties or
	// PatternProperties (additionalProperties: false).
	NoAdditional bool
	// Values validates every value of an object whose keys are free
	// (patternProperties {".*": Values}, e.g. labels, upstream nodes).
	Values *Schema
	// PatternProperties validates the values of keys matching a pattern.
	PatternProperties map[string]*Schema

	Enum      []any
	MinLength int // 0 means no minimum
	MaxLength int // 0 means no maximum
	Pattern   *regexp.Regexp
	// Format is "ipv4" or "ipv6".
	Format string

	Minimum, Maximum *float64
	// ExclusiveMin makes Minimum exclusive (exclusiveMinimum: Minimum).
	ExclusiveMin bool

	Items       *Schema
	MinItems    int
	MaxItems    int
	UniqueItems bool

	AllOf []*Schema
	AnyOf []*Schema
	OneOf []*Schema
	Not   *Schema
	// If, Then, Else: when v matches If, it must match Then, else Else.
	If, Then, Else *Schema

	MinProperties int
	MaxProperties int // 0 means no maximum
	// Dependencies: when the named property is present, the object must
	// also match its schema.
	Dependencies map[string]*Schema

	Default     any
	Description string
	Title       string
}

// Num returns a pointer to f, for Minimum and Maximum.
func Num(f float64) *float64 { return &f }

// DecodeJSON decodes a JSON document keeping numbers exact (json.Number), the
// form Validate expects.
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("invalid character after top-level value")
	}
	return v, nil
}

// Validate checks v (as decoded by DecodeJSON) against s, filling defaults in.
func (s *Schema) Validate(v any) error {
	if s == nil {
		return nil
	}
	if s.Type != "" {
		if err := checkType(s.Type, v); err != nil {
			return err
		}
	}
	if m, ok := asObject(v); ok && s.hasObjectKeywords() {
		if err := s.checkObject(m); err != nil {
			return err
		}
	}
	if a, ok := asArray(v); ok {
		if err := s.checkArray(a); err != nil {
			return err
		}
	}
	switch x := v.(type) {
	case string:
		n := len([]rune(x))
		if s.MinLength > 0 && n < s.MinLength {
			return fmt.Errorf("string too short, expected at least %d, got %d", s.MinLength, n)
		}
		if s.MaxLength > 0 && n > s.MaxLength {
			return fmt.Errorf("string too long, expected at most %d, got %d", s.MaxLength, n)
		}
		if s.Pattern != nil && !s.Pattern.MatchString(x) {
			return fmt.Errorf("failed to match pattern %s with %s", luaQuote(s.Pattern.String()), luaQuote(x))
		}
		switch s.Format {
		case "ipv4":
			if !ipv4RE.MatchString(x) {
				return fmt.Errorf("expect valid ipv4 address but got: %s", x)
			}
		case "ipv6":
			if a, err := netip.ParseAddr(x); err != nil || !a.Is6() {
				return fmt.Errorf("expect valid ipv6 address but got: %s", x)
			}
		}
	case json.Number:
		f, _ := x.Float64()
		if s.Minimum != nil {
			if s.ExclusiveMin && f <= *s.Minimum {
				return fmt.Errorf("expected %s to be greater than %s", luaNum(x), fmtNum(*s.Minimum))
			}
			if !s.ExclusiveMin && f < *s.Minimum {
				return fmt.Errorf("expected %s to be at least %s", luaNum(x), fmtNum(*s.Minimum))
			}
		}
		if s.Maximum != nil && f > *s.Maximum {
			return fmt.Errorf("expected %s to be at most %s", luaNum(x), fmtNum(*s.Maximum))
		}
	}
	if len(s.Enum) > 0 && !inEnum(s.Enum, v) {
		return fmt.Errorf("matches none of the enum values")
	}
	for i, sub := range s.AllOf {
		if err := sub.Validate(v); err != nil {
			return fmt.Errorf("allOf %d failed: %w", i+1, err)
		}
	}
	if len(s.AnyOf) > 0 {
		ok := false
		for _, sub := range s.AnyOf {
			if sub.Validate(v) == nil {
				ok = true
				break
			}
		}
		if !ok {
			var req []string
			for _, sub := range s.AnyOf {
				if len(sub.Required) > 0 {
					b, _ := json.Marshal(sub.Required)
					req = append(req, string(b))
				}
			}
			if len(req) > 0 {
				return fmt.Errorf("object matches none of the required: %s", strings.Join(req, " or "))
			}
			return fmt.Errorf("object matches none of the required")
		}
	}
	if len(s.OneOf) > 0 {
		matched := 0
		for i, sub := range s.OneOf {
			if sub.check(v) == nil {
				if matched != 0 {
					return fmt.Errorf("value should match only one schema, but matches both schemas %d and %d", matched, i+1)
				}
				matched = i + 1
			}
		}
		if matched == 0 {
			return fmt.Errorf("value should match only one schema, but matches none")
		}
	}
	if s.If != nil {
		if s.If.check(v) == nil {
			if s.Then != nil && s.Then.Validate(v) != nil {
				return fmt.Errorf("then clause did not match")
			}
		} else if s.Else != nil && s.Else.Validate(v) != nil {
			return fmt.Errorf("else clause did not match")
		}
	}
	if s.Not != nil && s.Not.check(v) == nil {
		return fmt.Errorf("value wasn't supposed to match schema")
	}
	return nil
}

var ipv4RE = regexp.MustCompile(`^((25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$`)

// asObject views v as a Lua table with string keys: an object, or an
// empty array (Lua cannot tell {} from []).
func asObject(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case []any:
		if len(x) == 0 {
			return map[string]any{}, true
		}
	}
	return nil, false
}

// asArray views v as a Lua sequence: an array, or an empty object.
func asArray(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case map[string]any:
		if len(x) == 0 {
			return nil, true
		}
	}
	return nil, false
}

func (s *Schema) hasObjectKeywords() bool {
	return s.Properties != nil || s.Required != nil || s.NoAdditional || s.Values != nil ||
		s.PatternProperties != nil || s.MinProperties > 0 || s.MaxProperties > 0 || s.Dependencies != nil
}

// check validates without leaving defaults behind in v (for probing).
func (s *Schema) check(v any) error {
	if _, ok := v.(map[string]any); !ok {
		if _, ok := v.([]any); !ok {
			return s.Validate(v)
		}
	}
	return s.Validate(deepCopy(v))
}

// checkObject validates properties in order, then the remaining required
// ones, then pattern and additional properties, as jsonschema does.
func (s *Schema) checkObject(m map[string]any) error {
	required := map[string]bool{}
	for _, name := range s.Required {
		required[name] = true
	}
	for _, k := range sortedKeys(s.Properties) {
		sub := s.Properties[k]
		if val, ok := m[k]; ok {
			if err := sub.Validate(val); err != nil {
				return fmt.Errorf("property %s validation failed: %w", luaQuote(k), err)
			}
		} else if required[k] {
			return fmt.Errorf("property %s is required", luaQuote(k))
		} else if sub != nil && sub.Default != nil {
			m[k] = deepCopy(sub.Default)
		}
		delete(required, k)
	}
	for _, name := range s.Required {
		if _, ok := m[name]; !ok && required[name] {
			return fmt.Errorf("property %s is required", luaQuote(name))
		}
	}
	for _, k := range sortedKeys(s.Dependencies) {
		if _, ok := m[k]; ok {
			if err := s.Dependencies[k].Validate(m); err != nil {
				return fmt.Errorf("failed to validate dependent schema for %s: %w", luaQuote(k), err)
			}
		}
	}
	patterns := s.PatternProperties
	if s.Values != nil {
		patterns = map[string]*Schema{".*": s.Values}
	}
	if len(patterns) > 0 || s.NoAdditional {
		for _, k := range sortedKeys(m) {
			matched := false
			for _, p := range sortedKeys(patterns) {
				if !matchPattern(p, k) {
					continue
				}
				matched = true
				if err := patterns[p].Validate(m[k]); err != nil {
					return fmt.Errorf("failed to validate %s (matching %s): %w", k, luaQuote(p), err)
				}
			}
			if _, known := s.Properties[k]; s.NoAdditional && !known && !matched {
				return fmt.Errorf("additional properties forbidden, found %s", k)
			}
		}
	}
	for _, k := range sortedKeys(s.Dependencies) {
		if _, ok := m[k]; ok {
			if err := s.Dependencies[k].Validate(m); err != nil {
				return fmt.Errorf("failed to validate dependent schema for %q: %w", k, err)
			}
		}
	}
	if s.MinProperties > 0 && len(m) < s.MinProperties {
		return fmt.Errorf("expect object to have at least %d properties", s.MinProperties)
	}
	if s.MaxProperties > 0 && len(m) > s.MaxProperties {
		return fmt.Errorf("expect object to have at most %d properties", s.MaxProperties)
	}
	return nil
}

var patternCache sync.Map // pattern → *regexp.Regexp

func matchPattern(p, s string) bool {
	re, ok := patternCache.Load(p)
	if !ok {
		c, err := regexp.Compile(p)
		if err != nil {
			return false
		}
		re, _ = patternCache.LoadOrStore(p, c)
	}
	return re.(*regexp.Regexp).MatchString(s)
}

func (s *Schema) checkArray(x []any) error {
	if s.MinItems > 0 && len(x) < s.MinItems {
		return fmt.Errorf("expect array to have at least %d items", s.MinItems)
	}
	if s.MaxItems > 0 && len(x) > s.MaxItems {
		return fmt.Errorf("expect array to have at most %d items", s.MaxItems)
	}
	if s.Items != nil {
		for i, item := range x {
			if err := s.Items.Validate(item); err != nil {
				return fmt.Errorf("failed to validate item %d: %w", i+1, err)
			}
		}
	}
	if s.UniqueItems {
		seen := map[string]int{}
		for i, item := range x {
			b, _ := json.Marshal(item)
			if j, ok := seen[string(b)]; ok {
				return fmt.Errorf("expected unique items but items %d and %d are equal", j+1, i+1)
			}
			seen[string(b)] = i
		}
	}
	return nil
}

// luaQuote is Lua's string.format("%q", s), as the validator quotes
// property names, patterns and values.
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString("\\n")
		case c == '\r':
			b.WriteString("\\r")
		case c == 0:
			b.WriteString("\\0")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// luaNum prints a JSON number as Lua's tostring does.
func luaNum(n json.Number) string {
	f, err := n.Float64()
	if err != nil {
		return string(n)
	}
	if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 14, 64)
}

func checkType(want string, v any) error {
	got := jsonType(v)
	switch {
	case got == want:
		return nil
	case want == "number" && got == "integer":
		return nil
	case (want == "object" || want == "array") && isEmptyTable(v):
		return nil
	}
	return fmt.Errorf("wrong type: expected %s, got %s", want, luaType(v))
}

// luaType is the type name APISIX's validator reports for v: Lua's, where
// arrays and objects are both tables and every number is a number.
func luaType(v any) string {
	switch jsonType(v) {
	case "array", "object":
		return "table"
	case "integer":
		return "number"
	case "null":
		return "userdata" // cjson.null
	}
	return jsonType(v)
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) {
			return "integer" // Lua: a number n with n % 1 == 0
		}
		return "number"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func inEnum(enum []any, v any) bool {
	for _, e := range enum {
		switch ev := e.(type) {
		case string:
			if s, ok := v.(string); ok && s == ev {
				return true
			}
		case int:
			if n, ok := v.(json.Number); ok && string(n) == strconv.Itoa(ev) {
				return true
			}
		case bool:
			if b, ok := v.(bool); ok && b == ev {
				return true
			}
		case float64:
			if n, ok := v.(json.Number); ok {
				if f, err := n.Float64(); err == nil && f == ev {
					return true
				}
			}
		}
	}
	return false
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func isEmptyTable(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	case int:
		return json.Number(strconv.Itoa(x))
	case float64:
		return json.Number(fmtNum(x))
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// MarshalJSON renders s as JSON Schema, the form APISIX's schema API
// serves (GET /apisix/admin/schema/route, /apisix/admin/plugins/NAME).
func (s *Schema) MarshalJSON() ([]byte, error) {
	m := s.jsonSchema()
	return json.Marshal(m)
}

func (s *Schema) jsonSchema() map[string]any {
	m := map[string]any{}
	if s.Type != "" {
		m["type"] = s.Type
	}
	if s.Description != "" {
		m["description"] = s.Description
	}
	if s.Title != "" {
		m["title"] = s.Title
	}
	if len(s.Properties) > 0 {
		props := map[string]any{}
		for k, p := range s.Properties {
			if p != nil {
				props[k] = p
			}
		}
		m["properties"] = props
	}
	if len(s.Required) > 0 {
		m["required"] = s.Required
	}
	if s.NoAdditional {
		m["additionalProperties"] = false
	}
	patterns := map[string]any{}
	for k, p := range s.PatternProperties {
		patterns[k] = p
	}
	if s.Values != nil {
		patterns[".*"] = s.Values
	}
	if len(patterns) > 0 {
		m["patternProperties"] = patterns
	}
	if len(s.Enum) > 0 {
		m["enum"] = s.Enum
	}
	if s.MinLength > 0 {
		m["minLength"] = s.MinLength
	}
	if s.MaxLength > 0 {
		m["maxLength"] = s.MaxLength
	}
	if s.Pattern != nil {
		m["pattern"] = s.Pattern.String()
	}
	if s.Format != "" {
		m["format"] = s.Format
	}
	if s.Minimum != nil {
		if s.ExclusiveMin {
			m["exclusiveMinimum"] = *s.Minimum
		} else {
			m["minimum"] = *s.Minimum
		}
	}
	if s.Maximum != nil {
		m["maximum"] = *s.Maximum
	}
	if s.Items != nil {
		m["items"] = s.Items
	}
	if s.MinItems > 0 {
		m["minItems"] = s.MinItems
	}
	if s.MaxItems > 0 {
		m["maxItems"] = s.MaxItems
	}
	if s.UniqueItems {
		m["uniqueItems"] = true
	}
	if s.MinProperties > 0 {
		m["minProperties"] = s.MinProperties
	}
	if s.MaxProperties > 0 {
		m["maxProperties"] = s.MaxProperties
	}
	if len(s.Dependencies) > 0 {
		m["dependencies"] = s.Dependencies
	}
	for k, l := range map[string][]*Schema{"allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf} {
		if len(l) > 0 {
			m[k] = l
		}
	}
	for k, x := range map[string]*Schema{"not": s.Not, "if": s.If, "then": s.Then, "else": s.Else} {
		if x != nil {
			m[k] = x
		}
	}
	if s.Default != nil {
		m["default"] = s.Default
	}
	return m
}
