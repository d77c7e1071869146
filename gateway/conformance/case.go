package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// File is one ported APISIX .t file.
type File struct {
	Source string `yaml:"source"`
	// Tag is the APISIX release the file was ported from: 2.14.1 unless
	// given (the 3.x files, under testdata/3.18.0).
	Tag  string   `yaml:"tag"`
	Args []string `yaml:"args"`
	// PortServers are extra upstream servers for this file's cases, each
	// answering its own port number (the fake servers a .t file's
	// http_config adds, e.g. on 1970-1974).
	PortServers []int  `yaml:"port_servers"`
	Skip        string `yaml:"skip"`
	// Store is "etcd" for files whose cases write to the store directly
	// (etcd steps), as APISIX's tests write to etcd; "file" for APISIX's
	// standalone mode (config_provider: yaml), a file store that starts
	// empty; the default is bolt.
	Store string `yaml:"store"`
	// FlushRedis empties redis before every case, as a .t file whose
	// init_worker_by_lua calls lib/test_redis.flush_all (Test::Nginx
	// starts nginx afresh for every block).
	FlushRedis *RedisFlush `yaml:"flush_redis"`
	Cases      []Case      `yaml:"cases"`
	// Path is the case file, relative to testdata.
	Path string `yaml:"-"`
}

// RedisFlush is File.FlushRedis: Password is sent when redis asks for
// one (a case may have set requirepass), as flush_all's opts.password.
type RedisFlush struct {
	Password string `yaml:"password"`
}

// Case is one TEST block.
type Case struct {
	Test    int    `yaml:"test"`
	Name    string `yaml:"name"`
	Skip    string `yaml:"skip"`
	Differs string `yaml:"differs"`
	// Gap marks a case that runs and is known to fail for a behaviour
	// linkgate does not have yet: not deliberate, counted apart.
	Gap  string   `yaml:"gap"`
	Args []string `yaml:"args"`
	// Restart starts the case on a newly started gateway (same store), as
	// Test::Nginx starts nginx afresh for every block: in-memory state
	// such as limit-count's local counters begins at zero.
	Restart bool   `yaml:"restart"`
	Steps   []Step `yaml:"steps"`
	// Review is tools/apisixt's note on a drafted case; a case file
	// with one does not load: drafts are checked by hand.
	Review string `yaml:"review"`
}

// Step is one request and what must come back, or a pause.
type Step struct {
	Req     string            `yaml:"req"`
	Headers map[string]string `yaml:"headers"`
	Body    *string           `yaml:"body"`
	Want    Want              `yaml:"want"`
	Repeat  int               `yaml:"repeat"`
	// Concurrent sends the request that many times at once (Test::Nginx's
	// ngx.location.capture_multi); Statuses is then what they answer, in
	// any order, and Unique names a header every answer must carry, each
	// with a value of its own (request-id's ids).
	Concurrent int    `yaml:"concurrent"`
	Statuses   []int  `yaml:"statuses"`
	Unique     string `yaml:"unique"`
	// Bodies sends the request once per item, one after another, and
	// compares the answers' bodies (spaces trimmed) with them, in order,
	// or as sorted lists with Sorted: the Lua loops that collect
	// t() bodies and print them joined (table.sort, table.concat).
	Bodies []string `yaml:"bodies"`
	Sorted bool     `yaml:"sorted"`
	// Timeout is the client's, in seconds (Test::Nginx's --- timeout; 10).
	Timeout float64 `yaml:"timeout"`
	// Range runs the step once for each i from Range[0] to Range[1], with
	// ${i} in what it sends.
	Range []int `yaml:"range"`
	// Count sends the request Count times and checks how many answers
	// had each body (want.counts): a balancer's distribution.
	Count  int     `yaml:"count"`
	Sleep  float64 `yaml:"sleep"`
	Review string  `yaml:"review"`
	// Etcd writes straight to the store, bypassing the admin API's checks
	// (files with store: etcd): {put: /routes/1, value: '{...}'} or
	// {delete: /routes/1}; keys are relative to the /apisix prefix.
	Etcd *EtcdOp `yaml:"etcd"`
	// Redis sends commands, in order on one connection, to the redis-server
	// of the redis files (as their Lua does with resty.redis), each of which
	// must answer one line that is not an error: [[CONFIG, SET, requirepass, foobared]].
	Redis [][]string `yaml:"redis"`
	// Capture saves values of the JSON answer for later steps of the
	// case, used there as ${name}: "node.key" or "node.key =~ REGEX"
	// (the first group).
	Capture map[string]string `yaml:"capture"`
	// Stream sends these bytes on a new connection to the gateway's
	// stream listener (--listen-stream; Test::Nginx's stream_request) and
	// reads the answer until the gateway closes it: want.body. APISIX's
	// stream upstream, 127.0.0.1:1995, answers "hello world\n".
	Stream *string `yaml:"stream"`
}

// EtcdOp is a direct store write.
type EtcdOp struct {
	Put    string `yaml:"put"`
	Value  string `yaml:"value"`
	Delete string `yaml:"delete"`
}

// Want is what a step's answer must match; empty fields match anything.
type Want struct {
	// NoAnswer: the client's timeout passes with no answer (a request
	// held back, as limit-req's delay; Test::Nginx's --- abort).
	NoAnswer    bool               `yaml:"no_answer"`
	Status      Status             `yaml:"status"`
	Body        *string            `yaml:"body"`
	BodyLike    string             `yaml:"body_like"`
	BodyUnlike  string             `yaml:"body_unlike"`
	JSON        any                `yaml:"json"`
	Headers     map[string]*string `yaml:"headers"`
	HeadersLike map[string]string  `yaml:"headers_like"`
	// Has lists dotted paths that must be present in the JSON answer
	// ("node.value.create_time").
	Has []string `yaml:"has"`
	// JSONEq is the whole JSON answer, once the Ignore paths are removed
	// from it (what APISIX's tests check by re-encoding the answer).
	JSONEq any      `yaml:"json_eq"`
	Ignore []string `yaml:"ignore"`
	// NE maps dotted paths to JSON values the answer must not have there
	// (an update_time that must have changed).
	NE map[string]string `yaml:"ne"`
	// Counts is, for a step with count, how many answers had each body;
	// StatusCounts how many had each status.
	Counts       map[string]int `yaml:"counts"`
	StatusCounts map[string]int `yaml:"status_counts"`
	// Spread bounds, for a step with count, how evenly the bodies came:
	// Bodies is how many distinct bodies there must be, and (most - fewest)
	// / the median count must be at most Spread (chash-balance.t's check).
	Spread *Spread `yaml:"spread"`
}

// Spread is want.spread.
type Spread struct {
	Bodies int     `yaml:"bodies"`
	Max    float64 `yaml:"max"`
}

// Status is an exact code or a class: 200, "2xx".
type Status struct {
	Code  int
	Class int // 2 for "2xx"
}

// UnmarshalYAML reads 200 or "2xx".
func (s *Status) UnmarshalYAML(n *yaml.Node) error {
	v := strings.TrimSpace(n.Value)
	if len(v) == 3 && strings.HasSuffix(v, "xx") && v[0] >= '1' && v[0] <= '5' {
		s.Class = int(v[0] - '0')
		return nil
	}
	c, err := strconv.Atoi(v)
	if err != nil || c < 100 || c > 599 {
		return fmt.Errorf("line %d: status %q: want a code or 2xx", n.Line, v)
	}
	s.Code = c
	return nil
}

func (s Status) match(code int) bool {
	switch {
	case s.Code != 0:
		return code == s.Code
	case s.Class != 0:
		return code/100 == s.Class
	}
	return true
}

func (s Status) String() string {
	if s.Class != 0 {
		return fmt.Sprintf("%dxx", s.Class)
	}
	return strconv.Itoa(s.Code)
}

// AllowDrafts makes LoadFile accept cases with review notes, to run drafts
// while porting (LINKGATE_CONFORMANCE_DRAFTS=1); committed cases have none.
var AllowDrafts bool

// LoadFiles reads every *.t.yaml under dir.
func LoadFiles(dir string) ([]*File, error) {
	var files []*File
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".t.yaml") {
			return err
		}
		f, err := LoadFile(path)
		if err != nil {
			return err
		}
		f.Path, _ = filepath.Rel(dir, path)
		files = append(files, f)
		return nil
	})
	sort.Slice(files, func(i, j int) bool {
		if files[i].Tag != files[j].Tag {
			return files[i].Tag < files[j].Tag
		}
		return files[i].Source < files[j].Source
	})
	return files, err
}

// LoadFile reads and checks one case file.
func LoadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !strings.HasPrefix(f.Source, "t/") || !strings.HasSuffix(f.Source, ".t") {
		return nil, fmt.Errorf("%s: source %q: want t/…/name.t", path, f.Source)
	}
	seen := map[int]bool{}
	for i, c := range f.Cases {
		name := f.CaseName(c)
		switch {
		case c.Test < 1:
			return nil, fmt.Errorf("%s: case %d: no test number", path, i+1)
		case seen[c.Test]:
			return nil, fmt.Errorf("%s: %s twice", path, name)
		case c.Skip == "" && f.Skip == "" && len(c.Steps) == 0 && !AllowDrafts:
			return nil, fmt.Errorf("%s: %s has no steps and no skip reason", path, name)
		case c.Skip != "" && c.Differs != "":
			return nil, fmt.Errorf("%s: %s is both skipped and differs", path, name)
		case c.Gap != "" && (c.Skip != "" || c.Differs != ""):
			return nil, fmt.Errorf("%s: %s is a gap and skipped or differs", path, name)
		}
		seen[c.Test] = true
		if c.Review != "" && !AllowDrafts {
			return nil, fmt.Errorf("%s: %s is a draft not checked by hand (review: %s)", path, name, c.Review)
		}
		for j, s := range c.Steps {
			if s.Review != "" && !AllowDrafts {
				return nil, fmt.Errorf("%s: %s step %d is a draft not checked by hand (review: %s)", path, name, j+1, s.Review)
			}
			if s.Concurrent > 0 && len(s.Statuses) != s.Concurrent {
				return nil, fmt.Errorf("%s: %s step %d: concurrent %d wants %d statuses", path, name, j+1, s.Concurrent, s.Concurrent)
			}
			if s.Req == "" && s.Sleep == 0 && s.Etcd == nil && s.Redis == nil && s.Stream == nil {
				return nil, fmt.Errorf("%s: %s step %d: neither req, sleep, etcd, redis nor stream", path, name, j+1)
			}
			if s.Etcd != nil && f.Store != "etcd" {
				return nil, fmt.Errorf("%s: %s step %d: an etcd step in a file without store: etcd", path, name, j+1)
			}
			if s.Req != "" {
				if _, _, ok := strings.Cut(s.Req, " "); !ok {
					return nil, fmt.Errorf("%s: %s step %d: req %q: want \"METHOD /path\"", path, name, j+1, s.Req)
				}
			}
			for _, re := range []string{s.Want.BodyLike, s.Want.BodyUnlike} {
				if _, err := regexp.Compile(re); err != nil {
					return nil, fmt.Errorf("%s: %s step %d: %q: %w", path, name, j+1, re, err)
				}
			}
			for h, re := range s.Want.HeadersLike {
				if _, err := regexp.Compile(re); err != nil {
					return nil, fmt.Errorf("%s: %s step %d: headers_like %s: %w", path, name, j+1, h, err)
				}
			}
		}
	}
	return &f, nil
}

// CaseName is "routes.t:TEST 3".
func (f *File) CaseName(c Case) string {
	return fmt.Sprintf("%s:TEST %d", filepath.Base(f.Source), c.Test)
}

// Response is what came back for a step.
type Response struct {
	Status  int
	Headers map[string][]string // canonical names
	Body    []byte
}

// check matches r against w, returning why it does not.
func (w Want) check(r *Response) error {
	if !w.Status.match(r.Status) {
		return fmt.Errorf("status %d, want %s (body %q)", r.Status, w.Status, clip(r.Body))
	}
	if w.Body != nil && string(r.Body) != *w.Body {
		return fmt.Errorf("body %q, want %q", r.Body, *w.Body)
	}
	if w.BodyLike != "" && !regexp.MustCompile(w.BodyLike).Match(r.Body) {
		return fmt.Errorf("body %q does not match /%s/", clip(r.Body), w.BodyLike)
	}
	if w.BodyUnlike != "" && regexp.MustCompile(w.BodyUnlike).Match(r.Body) {
		return fmt.Errorf("body %q matches /%s/", clip(r.Body), w.BodyUnlike)
	}
	if w.JSON != nil {
		got, err := decodeJSON(r.Body)
		if err != nil {
			return err
		}
		pattern, err := w.pattern()
		if err != nil {
			return err
		}
		if err := subset(pattern, got, ""); err != nil {
			return fmt.Errorf("%v in %s", err, clip(r.Body))
		}
	}
	if len(w.Has) > 0 {
		got, err := decodeJSON(r.Body)
		if err != nil {
			return err
		}
		for _, p := range w.Has {
			if _, ok := lookup(got, p); !ok {
				return fmt.Errorf("%s missing in %s", p, clip(r.Body))
			}
		}
	}
	if w.JSONEq != nil {
		got, err := decodeJSON(r.Body)
		if err != nil {
			return err
		}
		for _, p := range w.Ignore {
			remove(got, p)
		}
		want, err := jsonValue(w.JSONEq)
		if err != nil {
			return err
		}
		if show(want) != show(got) {
			return fmt.Errorf("JSON %s, want %s (ignoring %v)", show(got), show(want), w.Ignore)
		}
	}
	if len(w.NE) > 0 {
		got, err := decodeJSON(r.Body)
		if err != nil {
			return err
		}
		for p, old := range w.NE {
			v, _ := lookup(got, p)
			if show(v) == old || fmt.Sprint(v) == old {
				return fmt.Errorf("%s is still %s in %s", p, old, clip(r.Body))
			}
		}
	}
	for name, want := range w.Headers {
		got, ok := r.Headers[canonical(name)]
		switch {
		case want == nil && ok:
			return fmt.Errorf("header %s: %q, want none", name, got)
		case want != nil && (!ok || strings.Join(got, ", ") != *want):
			return fmt.Errorf("header %s: %q, want %q", name, got, *want)
		}
	}
	for name, re := range w.HeadersLike {
		got := strings.Join(r.Headers[canonical(name)], ", ")
		if !regexp.MustCompile(re).MatchString(got) {
			return fmt.Errorf("header %s: %q does not match /%s/", name, got, re)
		}
	}
	return nil
}

func decodeJSON(b []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("body is not JSON (%v): %q", err, clip(b))
	}
	return v, nil
}

// lookup follows a dotted path ("node.nodes.1.key", arrays from 1 as in Lua).
func lookup(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 1 || i > len(x) {
				return nil, false
			}
			v = x[i-1]
		default:
			return nil, false
		}
	}
	return v, true
}

// remove deletes a dotted path from a decoded JSON value.
func remove(v any, path string) {
	parent, last := path, ""
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent, last = path[:i], path[i+1:]
	} else {
		parent, last = "", path
	}
	p := v
	if parent != "" {
		var ok bool
		if p, ok = lookup(v, parent); !ok {
			return
		}
	}
	if m, ok := p.(map[string]any); ok {
		delete(m, last)
	}
}

// capture reads spec ("path" or "path =~ regex") from a JSON answer.
func capture(r *Response, spec string) (string, error) {
	path, re, hasRE := strings.Cut(spec, " =~ ")
	var s string
	if strings.TrimSpace(path) == "body" {
		s = string(r.Body) // the whole answer (jwt-auth's signed token)
	} else {
		got, err := decodeJSON(r.Body)
		if err != nil {
			return "", err
		}
		v, ok := lookup(got, strings.TrimSpace(path))
		if !ok {
			return "", fmt.Errorf("capture %s: missing in %s", path, clip(r.Body))
		}
		if s, ok = v.(string); !ok {
			s = show(v)
		}
	}
	if hasRE {
		m := regexp.MustCompile(strings.TrimSpace(re)).FindStringSubmatch(s)
		if len(m) < 2 {
			return "", fmt.Errorf("capture %s: %q does not match %s", path, s, re)
		}
		s = m[1]
	}
	return s, nil
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// pattern is the json field as JSON-decoded values: a YAML value, or a
// string holding JSON text (as APISIX's tests write their patterns).
func (w Want) pattern() (any, error) { return jsonValue(w.JSON) }

func jsonValue(v any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return normalize(v), nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("the case's JSON is not JSON: %w", err)
	}
	return out, nil
}

// normalize turns YAML-decoded values into JSON-decoded ones.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalize(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = normalize(e)
		}
		return s
	case int:
		return json.Number(strconv.Itoa(x))
	case float64:
		return json.Number(strconv.FormatFloat(x, 'f', -1, 64))
	}
	return v
}

// subset is lib/test_admin.lua's com_tab: every key of pattern is in got
// with an equal value; objects and arrays recurse key by key (an array is
// a table indexed 1..n); null means absent.
func subset(pattern, got any, path string) error {
	switch p := pattern.(type) {
	case nil:
		if got != nil {
			return fmt.Errorf("path %s: expect nothing, got %s", path, show(got))
		}
		return nil
	case map[string]any:
		switch g := got.(type) {
		case map[string]any:
			for _, k := range sortedKeys(p) {
				if err := subset(p[k], g[k], path+"->"+k); err != nil {
					return err
				}
			}
			return nil
		case []any:
			if len(p) == 0 {
				return nil // {} and [] are the same Lua table
			}
		}
	case []any:
		switch g := got.(type) {
		case []any:
			for i, e := range p {
				var ge any
				if i < len(g) {
					ge = g[i]
				}
				if err := subset(e, ge, path+"->"+strconv.Itoa(i+1)); err != nil {
					return err
				}
			}
			return nil
		case map[string]any:
			if len(p) == 0 {
				return nil
			}
		}
	case json.Number:
		if g, ok := got.(json.Number); ok && numEqual(p, g) {
			return nil
		}
	default:
		if pattern == got {
			return nil
		}
	}
	return fmt.Errorf("path %s: expect %s, got %s", path, show(pattern), show(got))
}

func numEqual(a, b json.Number) bool {
	x, err1 := a.Float64()
	y, err2 := b.Float64()
	return err1 == nil && err2 == nil && math.Abs(x-y) < 1e-9
}

func show(v any) string {
	if v == nil {
		return "nil"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func canonical(name string) string { return textproto.CanonicalMIMEHeaderKey(name) }
