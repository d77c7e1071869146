package gateway

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Expr is a compiled lua-resty-expr expression, the language of a route's
// "vars": a list of [var, operator, value] rules that must all hold, or
// nested ["OR"|"AND", rule...]. A "!" before the operator negates it.
type Expr struct {
	or    bool
	rules []exprRule
	subs  []*Expr
}

type exprRule struct {
	name   string
	op     string
	not    bool
	value  string
	num    float64
	isNum  bool
	values []string
	re     *regexp.Regexp
}

// ParseVars compiles a decoded "vars" array.
func ParseVars(v []any) (*Expr, error) {
	return parseExpr(v, false)
}

func parseExpr(v []any, or bool) (*Expr, error) {
	e := &Expr{or: or}
	for i, item := range v {
		arr, ok := item.([]any)
		if !ok {
			return nil, fmt.Errorf("rule %d must be an array", i+1)
		}
		if len(arr) > 0 {
			if s, ok := arr[0].(string); ok && (s == "OR" || s == "AND" || s == "||" || s == "&&") {
				sub, err := parseExpr(arr[1:], s == "OR" || s == "||")
				if err != nil {
					return nil, err
				}
				e.subs = append(e.subs, sub)
				continue
			}
		}
		r, err := parseRule(arr)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		e.rules = append(e.rules, r)
	}
	return e, nil
}

func parseRule(arr []any) (exprRule, error) {
	var r exprRule
	if len(arr) >= 3 {
		if s, ok := arr[1].(string); ok && s == "!" {
			r.not = true
			arr = append(arr[:1:1], arr[2:]...)
		}
	}
	if len(arr) != 3 {
		return r, fmt.Errorf("expected [var, operator, value]")
	}
	name, ok1 := arr[0].(string)
	op, ok2 := arr[1].(string)
	if !ok1 || !ok2 {
		return r, fmt.Errorf("var and operator must be strings")
	}
	r.name, r.op = name, op
	switch op {
	case "==", "~=", "has":
		r.value = scalar(arr[2])
	case ">", "<", ">=", "<=":
		f, err := strconv.ParseFloat(scalar(arr[2]), 64)
		if err != nil {
			return r, fmt.Errorf("operator %s needs a number", op)
		}
		r.num, r.isNum = f, true
	case "~~", "~*":
		pat := scalar(arr[2])
		if op == "~*" {
			pat = "(?i)" + pat
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return r, err
		}
		r.re = re
	case "in":
		list, ok := arr[2].([]any)
		if !ok {
			return r, fmt.Errorf("operator in needs an array")
		}
		for _, x := range list {
			r.values = append(r.values, scalar(x))
		}
	default:
		return r, fmt.Errorf("invalid operator '%s'", op)
	}
	return r, nil
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Vars reads request variables; gateway.Ctx is one.
type Vars interface {
	Var(name string) string
}

// Eval reports whether the expression holds, reading variables from get.
func (e *Expr) Eval(get Vars) bool {
	if e == nil {
		return true
	}
	if e.or {
		for i := range e.rules {
			if e.rules[i].eval(get) {
				return true
			}
		}
		for _, s := range e.subs {
			if s.Eval(get) {
				return true
			}
		}
		return false
	}
	for i := range e.rules {
		if !e.rules[i].eval(get) {
			return false
		}
	}
	for _, s := range e.subs {
		if !s.Eval(get) {
			return false
		}
	}
	return true
}

func (r *exprRule) eval(get Vars) bool {
	v := get.Var(r.name)
	var ok bool
	switch r.op {
	case "==":
		ok = v == r.value
	case "~=":
		ok = v != r.value
	case "has":
		ok = strings.Contains(v, r.value)
	case ">", "<", ">=", "<=":
		f, err := strconv.ParseFloat(v, 64)
		if err == nil {
			switch r.op {
			case ">":
				ok = f > r.num
			case "<":
				ok = f < r.num
			case ">=":
				ok = f >= r.num
			default:
				ok = f <= r.num
			}
		}
	case "~~", "~*":
		ok = r.re.MatchString(v)
	case "in":
		for _, x := range r.values {
			if x == v {
				ok = true
				break
			}
		}
	}
	return ok != r.not
}
