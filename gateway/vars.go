package gateway

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Expr is a compiled lua-resty-expr (v1.3.1) expression, the language of
// a route's "vars": a list of rules that must all hold, each
// [var, operator, value] (or [var, "!", operator, value] to negate it, or
// [var, value] for ==), nested lists, and ["OR"|"AND"|"!OR"|"!AND", rule,
// rule…]. Compile errors and evaluation follow the Lua library exactly:
// variables are strings (absent ones nil), == and ~= against a number
// compare numerically, >, <, >=, <= convert both sides, ~~ and ~* are
// regular expressions, "in" compares with each array element and "has"
// only holds for multi-valued variables.
type Expr struct {
	logic string // "AND", "OR", "!AND", "!OR"; "" for a leaf
	exprs []*Expr
	// leaf
	name    string
	op      string
	reverse bool
	str     string
	num     float64
	isNum   bool
	isNil   bool
	list0   bool // the variable may be a list or present and empty (ListVars)
	list    []any
	re      *regexp.Regexp
}

// ExprError is a vars expression lua-resty-expr would refuse.
type ExprError struct{ Msg string }

func (e *ExprError) Error() string { return e.Msg }

func exprErr(msg string) error { return &ExprError{msg} }

var logicOps = map[string]bool{"OR": true, "!OR": true, "AND": true, "!AND": true}

// ParseVars compiles a decoded "vars" array (expr.new).
func ParseVars(rule []any) (*Expr, error) {
	if len(rule) == 0 {
		return nil, nil // matches everything
	}
	if _, ok := rule[0].([]any); !ok {
		if s, _ := rule[0].(string); !logicOps[strings.ToUpper(s)] {
			return nil, exprErr("rule should be wrapped inside brackets")
		}
	}
	return compileRules(rule)
}

func compileRules(rules []any) (*Expr, error) {
	if len(rules) == 0 {
		return nil, exprErr("rule too short")
	}
	if _, ok := rules[0].([]any); ok {
		e := &Expr{logic: "AND"}
		for _, r := range rules {
			sub, ok := r.([]any)
			if !ok {
				return nil, exprErr("invalid expression")
			}
			c, err := compileRules(sub)
			if err != nil {
				return nil, err
			}
			e.exprs = append(e.exprs, c)
		}
		return e, nil
	}
	if s, ok := rules[0].(string); ok && logicOps[strings.ToUpper(s)] {
		if len(rules) <= 2 {
			return nil, exprErr("rule too short")
		}
		e := &Expr{logic: strings.ToUpper(s)}
		for _, r := range rules[1:] {
			sub, ok := r.([]any)
			if !ok {
				return nil, exprErr("invalid expression")
			}
			c, err := compileRules(sub)
			if err != nil {
				return nil, err
			}
			e.exprs = append(e.exprs, c)
		}
		return e, nil
	}
	return compileLeaf(rules)
}

var compareOps = map[string]bool{"==": true, "~=": true, ">": true, ">=": true, "<": true, "<=": true, "~~": true, "~*": true, "in": true, "has": true}

func compileLeaf(expr []any) (*Expr, error) {
	// Lua tables have no holes: a missing element is nil, a JSON null is
	// ngx.null, a value.
	type missing struct{}
	at := func(i int) any {
		if i < len(expr) {
			if expr[i] == nil {
				return jsonNull{}
			}
			return expr[i]
		}
		return missing{}
	}
	e := &Expr{}
	lv, op, rv := at(0), at(1), at(2)
	if len(expr) == 4 {
		if s, _ := at(1).(string); s != "!" {
			return nil, exprErr("bad 'not' expression")
		}
		e.reverse = true
		lv, op, rv = at(0), at(2), at(3)
	}
	opStr, opIsStr := op.(string)
	if opIsStr {
		opStr = strings.ToLower(opStr)
	}
	if rv == (missing{}) && !compareOps[opStr] {
		// for compatibility: [var, value] means ==
		rv, op, opStr, opIsStr = op, "==", "==", true
		if rv == (missing{}) {
			return nil, exprErr("invalid expression")
		}
	}
	if lv == (missing{}) || op == (missing{}) {
		return nil, exprErr("invalid expression")
	}
	if !opIsStr || !compareOps[opStr] {
		return nil, exprErr("invalid operator '" + luaString(op) + "'")
	}
	name, ok := lv.(string)
	if !ok {
		name = luaString(lv) // never a variable name: evaluates as nil
	}
	e.name, e.op = name, opStr
	e.list0 = strings.HasPrefix(name, "graphql_")
	switch x := rv.(type) {
	case string:
		e.str = x
	case json.Number:
		e.num, _ = x.Float64()
		e.isNum = true
	case float64:
		e.num, e.isNum = x, true
	case []any:
		e.list = x
	case jsonNull, missing:
		e.isNil = true
	default:
		e.str = luaString(x)
	}
	if e.op == "~~" || e.op == "~*" {
		pat := e.str
		if e.isNum {
			pat = luaNumString(e.num)
		}
		if e.op == "~*" {
			pat = "(?i)" + pat
		}
		e.re, _ = regexp.Compile(pat) // an invalid pattern never matches, as re_find fails
	}
	return e, nil
}

// jsonNull is a JSON null inside a rule (ngx.null in Lua).
type jsonNull struct{}

func luaString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	case nil, jsonNull:
		return "userdata: NULL"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func luaNumString(f float64) string {
	if f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 14, 64)
}

// Vars reads request variables; gateway.Ctx is one. A variable that is
// not set reads as "" and is treated as nil.
type Vars interface {
	Var(name string) string
}

// ListVars is implemented by a Vars whose variables may be lists, or
// present with an empty value (APISIX's graphql_name, graphql_operation,
// graphql_root_fields). ok is false when the variable is nil.
type ListVars interface {
	VarList(name string) (values []string, isList, ok bool)
}

// Eval reports whether the expression holds, reading variables from get.
func (e *Expr) Eval(get Vars) bool {
	if e == nil {
		return true
	}
	switch e.logic {
	case "AND":
		return e.and(get)
	case "OR":
		return e.or(get)
	case "!AND":
		return !e.and(get)
	case "!OR":
		return !e.or(get)
	}
	return e.leaf(get)
}

func (e *Expr) and(get Vars) bool {
	for _, x := range e.exprs {
		if !x.Eval(get) {
			return false
		}
	}
	return true
}

func (e *Expr) or(get Vars) bool {
	for _, x := range e.exprs {
		if x.Eval(get) {
			return true
		}
	}
	return false
}

func (e *Expr) leaf(get Vars) bool {
	if lv, isLV := get.(ListVars); e.list0 && isLV {
		vals, isList, present := lv.VarList(e.name)
		switch {
		case !present:
			return e.compare("", true)
		case isList:
			// lua-resty-expr compares a table with == false, ~= true;
			// "has" looks for the value among its elements.
			ok := e.op == "~="
			if e.op == "has" {
				ok = !e.isNum && !e.isNil && slices.Contains(vals, e.str)
			}
			return ok != e.reverse
		default:
			return e.compare(vals[0], false)
		}
	}
	v := get.Var(e.name)
	return e.compare(v, v == "")
}

// compare applies the leaf's operator to the variable's value v (nil when
// isNil).
func (e *Expr) compare(v string, isNil bool) bool {
	var ok bool
	switch e.op {
	case "==":
		switch {
		case e.isNum:
			f, good := luaToNumber(v)
			ok = good && f == e.num
		case e.isNil:
			ok = isNil
		default:
			ok = !isNil && v == e.str
		}
	case "~=":
		switch {
		case e.isNum:
			f, good := luaToNumber(v)
			ok = !good || f != e.num
		case e.isNil:
			ok = !isNil
		default:
			ok = isNil || v != e.str
		}
	case ">", ">=", "<", "<=":
		l, good1 := luaToNumber(v)
		r, good2 := e.num, e.isNum
		if !e.isNum {
			r, good2 = luaToNumber(e.str)
		}
		if good1 && good2 {
			switch e.op {
			case ">":
				ok = l > r
			case ">=":
				ok = l >= r
			case "<":
				ok = l < r
			default:
				ok = l <= r
			}
		}
	case "~~", "~*":
		ok = !isNil && e.re != nil && e.re.MatchString(v)
	case "in":
		for _, x := range e.list {
			if s, isStr := x.(string); isStr && !isNil && s == v {
				ok = true
				break
			}
		}
	case "has":
		ok = false // the variables linkgate offers are single strings, never tables
	}
	return ok != e.reverse
}

// luaToNumber is Lua's tonumber for a string: decimal or 0x hex, with
// surrounding space.
func luaToNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if h, ok := strings.CutPrefix(strings.ToLower(strings.TrimPrefix(s, "-")), "0x"); ok {
		n, err := strconv.ParseUint(h, 16, 64)
		if err != nil {
			return 0, false
		}
		if strings.HasPrefix(s, "-") {
			return -float64(n), true
		}
		return float64(n), true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.ContainsAny(s, "_") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "nan") {
		return 0, false
	}
	return f, true
}
