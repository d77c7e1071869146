package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Schema is a small JSON Schema subset: the keywords APISIX 2.14's schemas
// use. Validate reports failures with the wording of APISIX's validator
// (api7/jsonschema), so admin API errors read like APISIX's, and injects
// defaults into the objects it walks, as APISIX stores them.
type Schema struct {
	Type       string             // object, array, string, integer, number, boolean; "" accepts any
	Properties map[string]*Schema // object properties
	Required   []string
	// NoAdditional forbids properties not in Properties.
	NoAdditional bool
	// Values validates every value of an object whose keys are free (e.g. upstream nodes map).
	Values *Schema

	Enum      []any
	MinLength int // 0 means no minimum
	MaxLength int // 0 means no maximum
	Pattern   *regexp.Regexp

	Minimum, Maximum *float64
	ExclusiveMin     bool

	Items       *Schema
	MinItems    int
	MaxItems    int
	UniqueItems bool

	AnyOf []*Schema
	OneOf []*Schema
	// If, Then, Else: when v matches If, it must match Then, else Else.
	If, Then, Else *Schema

	MinProperties int
	// Dependencies: when the named property is present, the object must
	// also match its schema.
	Dependencies map[string]*Schema

	Default any
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
	if len(s.AnyOf) > 0 {
		ok := false
		for _, sub := range s.AnyOf {
			if sub.Validate(v) == nil {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("object matches none of the requireds")
		}
	}
	if len(s.OneOf) > 0 {
		var matched []int
		for i, sub := range s.OneOf {
			if sub.check(v) == nil {
				matched = append(matched, i+1)
			}
		}
		switch len(matched) {
		case 0:
			return fmt.Errorf("value should match only one schema, but matches none")
		case 1:
		default:
			return fmt.Errorf("value should match only one schema, but matches both schemas %d and %d", matched[0], matched[1])
		}
	}
	if s.Type != "" {
		if err := checkType(s.Type, v); err != nil {
			return err
		}
	}
	if len(s.Enum) > 0 && !inEnum(s.Enum, v) {
		return fmt.Errorf("matches non of the enum values")
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
			return fmt.Errorf("failed to match pattern %q with %q", s.Pattern.String(), x)
		}
	case json.Number:
		f, _ := x.Float64()
		if s.Minimum != nil {
			if s.ExclusiveMin && f <= *s.Minimum {
				return fmt.Errorf("expected %s to be greater than %s", x, fmtNum(*s.Minimum))
			}
			if !s.ExclusiveMin && f < *s.Minimum {
				return fmt.Errorf("expected %s to be at least %s", x, fmtNum(*s.Minimum))
			}
		}
		if s.Maximum != nil && f > *s.Maximum {
			return fmt.Errorf("expected %s to be at most %s", x, fmtNum(*s.Maximum))
		}
	case []any:
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
	case map[string]any:
		if err := s.checkObject(x); err != nil {
			return err
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
	return nil
}

// check validates without leaving defaults behind in v (for oneOf probing).
func (s *Schema) check(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return s.Validate(v)
	}
	cp := deepCopy(m).(map[string]any)
	return s.Validate(cp)
}

func (s *Schema) checkObject(m map[string]any) error {
	for _, name := range s.Required {
		if _, ok := m[name]; !ok {
			return fmt.Errorf("property %q is required", name)
		}
	}
	if s.NoAdditional {
		for _, k := range sortedKeys(m) {
			if _, ok := s.Properties[k]; !ok {
				return fmt.Errorf("additional properties forbidden, found %s", k)
			}
		}
	}
	for _, k := range sortedKeys(s.Properties) {
		sub := s.Properties[k]
		val, ok := m[k]
		if !ok {
			if sub.Default == nil {
				continue
			}
			val = deepCopy(sub.Default)
			m[k] = val
		}
		if err := sub.Validate(val); err != nil {
			return fmt.Errorf("property %q validation failed: %w", k, err)
		}
	}
	if s.Values != nil {
		for _, k := range sortedKeys(m) {
			if err := s.Values.Validate(m[k]); err != nil {
				return fmt.Errorf("property %q validation failed: %w", k, err)
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
	return nil
}

func checkType(want string, v any) error {
	got := jsonType(v)
	switch {
	case got == want:
		return nil
	case want == "number" && got == "integer":
		return nil
	}
	if got == "integer" {
		got = "number" // Lua's type names, as APISIX's validator reports them
	}
	return fmt.Errorf("wrong type: expected %s, got %s", want, got)
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
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return "integer"
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
