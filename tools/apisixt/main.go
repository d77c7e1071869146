// Command apisixt drafts conformance case files (gateway/conformance) from
// APISIX's Test::Nginx .t files: one case per TEST block, with the
// requests, statuses, bodies and headers it can read off the block, and a
// "review" note wherever the block needs a human (Lua logic beyond one
// lib/test_admin call, Perl expressions, yaml_config, error-log checks).
// The conformance loader refuses a case that still has a review note, so
// every drafted case is checked by hand before it is committed. It writes
// no APISIX code into the drafts, only the HTTP exchanges.
//
//	go run ./tools/apisixt -repo /work/.mirror/apache+apisix/repo -tag 2.14.1 \
//	    -out gateway/conformance/testdata t/admin/routes.t t/admin/upstream.t
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

func main() {
	repo := flag.String("repo", "", "APISIX git directory (bare is fine)")
	tag := flag.String("tag", "2.14.1", "tag to read the .t files at")
	out := flag.String("out", "gateway/conformance/testdata", "where to write <dir>/<name>.t.yaml")
	force := flag.Bool("force", false, "overwrite existing case files")
	prior := flag.String("prior", "", "checked case files of an earlier tag: a block needing review that says the same there is taken from them")
	priorTag := flag.String("prior-tag", "2.14.1", "the tag -prior's files were ported from")
	v3 := flag.Bool("v3", false, "run the file with --admin-api-version v3, and rewrite reused cases' answers to its envelopes")
	flag.Parse()
	for _, f := range flag.Args() {
		src, err := exec.Command("git", "-C", *repo, "show", *tag+":"+f).Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "apisixt: %s: %v\n", f, err)
			os.Exit(1)
		}
		doc := draft(f, *tag, string(src), *v3)
		if *prior != "" || *v3 {
			var old, psrc []byte
			if *prior != "" {
				rel := filepath.Join(strings.TrimPrefix(filepath.Dir(f), "t/"), filepath.Base(f)+".yaml")
				old, _ = os.ReadFile(filepath.Join(*prior, rel))
				psrc, _ = exec.Command("git", "-C", *repo, "show", *priorTag+":"+f).Output()
			}
			var n int
			if doc, n, err = reusePrior(doc, string(src), string(psrc), old, *v3); err != nil {
				fmt.Fprintf(os.Stderr, "apisixt: %s: %v\n", f, err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "apisixt: %s: %d cases from %s\n", f, n, *priorTag)
		}
		dst := filepath.Join(*out, strings.TrimPrefix(filepath.Dir(f), "t/"), filepath.Base(f)+".yaml")
		if _, err := os.Stat(dst); err == nil && !*force {
			fmt.Fprintf(os.Stderr, "apisixt: %s exists (use -force)\n", dst)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "apisixt:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(dst, doc, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "apisixt:", err)
			os.Exit(1)
		}
		fmt.Println(dst)
	}
}

// block is one TEST block: its sections by name ("request", "error_code eval").
type block struct {
	n     int
	title string
	secs  map[string]string
	order []string
}

var (
	testRE    = regexp.MustCompile(`(?m)^=== TEST (\d+):?\s*(.*)$`)
	sectionRE = regexp.MustCompile(`^--- (\w+)( eval)?(?::\s*(.*))?$`)
)

func parse(src string) []block {
	_, data, ok := strings.Cut(src, "\n__DATA__\n")
	if !ok {
		return nil
	}
	idx := testRE.FindAllStringSubmatchIndex(data, -1)
	var blocks []block
	for i, m := range idx {
		end := len(data)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		n, _ := strconv.Atoi(data[m[2]:m[3]])
		b := block{n: n, title: strings.TrimSpace(data[m[4]:m[5]]), secs: map[string]string{}}
		var name string
		var lines []string
		flush := func() {
			if name != "" {
				b.secs[name] = strings.Join(lines, "\n")
				b.order = append(b.order, name)
			}
		}
		for _, line := range strings.Split(data[m[1]:end], "\n")[1:] {
			if sm := sectionRE.FindStringSubmatch(line); sm != nil {
				flush()
				name, lines = sm[1]+sm[2], nil
				if sm[3] != "" {
					lines = []string{sm[3]}
				}
				continue
			}
			lines = append(lines, line)
		}
		flush()
		for k, v := range b.secs {
			b.secs[k] = trimBlankTail(v) // sections end with blank lines
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// trimBlankTail keeps a section's text with one trailing newline, as
// Test::Nginx compares response bodies ("hello world\n").
func trimBlankTail(v string) string {
	v = strings.TrimRight(v, "\n")
	if v == "" {
		return ""
	}
	return v + "\n"
}

// step is a drafted step.
type step struct {
	req         string
	headers     [][2]string
	body        *string
	status      string
	respBody    *string
	bodyLike    string
	json        string
	respHdrs    [][2]string
	hdrsLike    [][2]string
	repeat      int
	sleep       string
	reviewNote  string
	jsonEq      *string
	ignore      []string
	has         []string
	capture     [][2]string
	ne          [][2]string
	count       int
	counts      [][2]string
	countStatus bool
}

type draftCase struct {
	n      int
	title  string
	steps  []step
	review []string
}

func draft(file, tag, src string, v3 bool) []byte {
	var cases []draftCase
	for _, b := range parse(src) {
		cases = append(cases, draftBlock(b))
	}
	return render(file, tag, cases, v3)
}

// Sections a drafted case cannot express: they need a human decision.
var reviewSections = map[string]string{
	"yaml_config": "sets config.yaml", "yaml_config eval": "sets config.yaml", "extra_yaml_config": "sets config.yaml",
	"apisix_yaml": "standalone apisix.yaml", "init_by_lua_block": "Lua init", "http_config": "nginx http config",
	"upstream_server_config": "upstream nginx config", "stream_config": "stream", "stream_request": "stream",
	"exec": "runs a command", "raw_request eval": "raw request", "debug_config eval": "debug config",
	"extra_init_by_lua": "Lua init", "main_config": "nginx main config", "wait": "waits", "timeout": "client timeout",
	"listen_ipv6": "IPv6 listener", "http2": "HTTP/2", "response_headers_raw_like eval": "raw headers",
	"raw_response_headers_like": "raw headers", "raw_response_headers_unlike eval": "raw headers",
	"response_body_unlike eval": "unlike", "error_code_like": "error_code_like", "response_args": "response_args",
}

func draftBlock(b block) draftCase {
	c := draftCase{n: b.n, title: b.title}
	for _, name := range b.order {
		if why, ok := reviewSections[name]; ok {
			c.review = append(c.review, "section "+name+" ("+why+")")
		}
	}
	onlyLog := true
	for _, name := range b.order {
		switch name {
		case "response_body", "response_body eval", "response_body_like", "response_body_like eval", "error_code",
			"error_code eval", "response_headers", "response_headers_like", "config":
			onlyLog = false
		}
	}
	if onlyLog {
		c.review = append(c.review, "asserts only on the error log: skip unless the status matters")
	}
	req := b.secs["request"]
	if req == "" && b.secs["request eval"] == "" && b.secs["pipelined_requests eval"] == "" {
		req = "GET /t"
	}
	if lua := b.secs["config"]; lua != "" && strings.HasPrefix(strings.TrimSpace(req), "GET /t") {
		if steps, ok := draftCounting(b, lua); ok {
			c.steps = steps
			return c
		}
		c.steps, c.review = draftLua(b, lua, c.review)
		return c
	}
	if b.secs["config"] != "" {
		c.review = append(c.review, "has a config section but requests "+firstLine(req))
	}
	c.steps, c.review = draftRequests(b, c.review)
	return c
}

func firstLine(s string) string { l, _, _ := strings.Cut(strings.TrimSpace(s), "\n"); return l }

// draftRequests drafts the data-plane requests of a block.
func draftRequests(b block, review []string) ([]step, []string) {
	var reqs []string
	switch {
	case b.secs["pipelined_requests eval"] != "":
		l, ok := perlStrings(b.secs["pipelined_requests eval"])
		if !ok {
			return nil, append(review, "pipelined_requests eval not understood")
		}
		reqs = l
	case b.secs["request eval"] != "":
		l, ok := perlStrings(b.secs["request eval"])
		if !ok {
			return nil, append(review, "request eval not understood")
		}
		reqs = l
	default:
		reqs = []string{strings.TrimSuffix(b.secs["request"], "\n")}
	}
	codes := make([]string, len(reqs))
	if v := b.secs["error_code"]; v != "" {
		for i := range codes {
			codes[i] = strings.TrimSpace(v)
		}
	} else if v := b.secs["error_code eval"]; v != "" {
		l, ok := perlList(v)
		if !ok || len(l) != len(reqs) {
			review = append(review, "error_code eval not understood")
		} else {
			copy(codes, l)
		}
	} else {
		for i := range codes {
			codes[i] = "200" // Test::Nginx's default
		}
	}
	bodies := make([]*string, len(reqs))
	likes := make([]string, len(reqs))
	if v, ok := b.secs["response_body"]; ok {
		if len(reqs) > 1 {
			review = append(review, "one response_body for several requests (Test::Nginx: concatenated)")
		} else {
			bodies[0] = &v
		}
	}
	if v := b.secs["response_body eval"]; v != "" {
		if l, ok := perlStrings(v); ok && len(l) == len(reqs) {
			for i := range l {
				bodies[i] = &l[i]
			}
		} else if re, ok := perlRegex(v); ok && len(reqs) == 1 {
			likes[0] = re
		} else if l, ok := perlRegexes(v); ok && len(l) == len(reqs) {
			copy(likes, l)
		} else if s, ok := perlConcat(v); ok && len(reqs) == 1 {
			bodies[0] = &s
		} else {
			review = append(review, "response_body eval not understood")
		}
	}
	for _, k := range []string{"response_body_like", "response_body_like eval"} {
		v := b.secs[k]
		if v == "" {
			continue
		}
		if k == "response_body_like" {
			likes[0] = strings.TrimSuffix(v, "\n")
		} else if re, ok := perlRegex(v); ok {
			for i := range likes {
				likes[i] = re
			}
		} else if l, ok := perlRegexes(v); ok && len(l) == len(reqs) {
			copy(likes, l)
		} else {
			review = append(review, k+" not understood")
		}
	}
	var hdrs [][2]string
	for _, line := range strings.Split(b.secs["more_headers"], "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			hdrs = append(hdrs, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	var respHdrs, hdrsLike [][2]string
	for _, line := range strings.Split(b.secs["response_headers"], "\n") {
		if strings.HasPrefix(line, "!") {
			respHdrs = append(respHdrs, [2]string{strings.TrimSpace(line[1:]), "\x00"})
		} else if k, v, ok := strings.Cut(line, ":"); ok {
			respHdrs = append(respHdrs, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	for _, line := range strings.Split(b.secs["response_headers_like"], "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			hdrsLike = append(hdrsLike, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	var steps []step
	for i, r := range reqs {
		line, body, hasBody := strings.Cut(r, "\n")
		f := strings.Fields(line)
		if len(f) < 2 {
			review = append(review, fmt.Sprintf("request %q not understood", line))
			continue
		}
		s := step{req: f[0] + " " + f[1], headers: hdrs, status: codes[i], respBody: bodies[i], bodyLike: likes[i]}
		if len(f) > 2 && f[2] != "HTTP/1.1" {
			s.reviewNote = "request uses " + f[2]
		}
		if hasBody && body != "" {
			s.body = &body
		}
		if i == len(reqs)-1 {
			s.respHdrs, s.hdrsLike = respHdrs, hdrsLike
		}
		steps = append(steps, s)
	}
	return collapse(steps), review
}

// collapse merges identical consecutive steps into one with repeat.
func collapse(steps []step) []step {
	var out []step
	for _, s := range steps {
		if n := len(out); n > 0 && sameStep(out[n-1], s) {
			out[n-1].repeat = max(out[n-1].repeat, 1) + 1
			continue
		}
		out = append(out, s)
	}
	return out
}

func sameStep(a, b step) bool {
	eq := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.req == b.req && a.status == b.status && eq(a.body, b.body) && eq(a.respBody, b.respBody) &&
		a.bodyLike == b.bodyLike && len(a.respHdrs) == 0 && len(b.respHdrs) == 0 && fmt.Sprint(a.headers) == fmt.Sprint(b.headers)
}

var (
	codeLineRE   = regexp.MustCompile(`(?m)code: (\d{3})(?: message: (.*))?$`)
	countURIRE   = regexp.MustCompile(`local uri = "http://127\.0\.0\.1:" \.\. ngx\.var\.server_port\s*\.\. "([^"]+)"`)
	countLoopRE  = regexp.MustCompile(`for i = 1, (\d+) do`)
	countKeyRE   = regexp.MustCompile(`ports_count\[(res\.body|status|res\.status)\]`)
	countSleepRE = regexp.MustCompile(`ngx\.sleep\(([\d.]+)\)`)
	countEntryRE = regexp.MustCompile(`\{"count":(\d+),"port":"([^"]*)"\}`)
	countHdrRE   = regexp.MustCompile(`headers = \{([^}]*)\}`)
	reqHdrRE     = regexp.MustCompile(`request_headers\["([^"]+)"\] = "([^"]*)"`)
	luaCallRE    = regexp.MustCompile(`(?:^|[^\w.:])t\(\s*`)
	methodRE     = regexp.MustCompile(`^ngx\.HTTP_([A-Z]+)$`)
)

// draftCounting drafts APISIX's balancer idiom: optionally one request and
// a sleep, then N requests to a path, counting bodies (or statuses), the
// counts printed as [{"count":c,"port":"p"}…].
func draftCounting(b block, lua string) ([]step, bool) {
	uri := countURIRE.FindStringSubmatch(lua)
	loop := countLoopRE.FindStringSubmatch(lua)
	key := countKeyRE.FindStringSubmatch(lua)
	rb := b.secs["response_body"]
	if uri == nil || loop == nil || key == nil || strings.Contains(lua, "t('/apisix/admin") || !strings.HasPrefix(rb, "[") {
		return nil, false
	}
	var steps []step
	loopAt := strings.Index(lua, loop[0])
	var headers [][2]string
	if m := countHdrRE.FindStringSubmatch(lua[loopAt:]); m != nil {
		for _, kvs := range strings.Split(m[1], ",") {
			k, v, ok := strings.Cut(kvs, "=")
			if !ok {
				return nil, false
			}
			k = strings.Trim(strings.TrimSpace(k), `["]`)
			v, ok = luaString(strings.TrimSpace(v))
			if !ok {
				return nil, false
			}
			headers = append(headers, [2]string{k, v})
		}
	}
	before := lua[:loopAt]
	for _, m := range reqHdrRE.FindAllStringSubmatch(before, -1) {
		headers = append(headers, [2]string{m[1], m[2]})
	}
	if strings.Contains(before, "request_uri(uri") {
		steps = append(steps, step{req: "GET " + uri[1], headers: headers})
	}
	if m := countSleepRE.FindAllStringSubmatch(before, -1); m != nil {
		steps = append(steps, step{sleep: m[len(m)-1][1]})
	}
	var counts [][2]string
	for _, m := range countEntryRE.FindAllStringSubmatch(rb, -1) {
		counts = append(counts, [2]string{m[2], m[1]})
	}
	if len(counts) == 0 {
		return nil, false
	}
	n, _ := strconv.Atoi(loop[1])
	st := step{req: "GET " + uri[1], headers: headers, count: n, counts: counts, countStatus: key[1] != "res.body"}
	return append(steps, st), true
}

// draftLua drafts the lib/test_admin calls of a "location /t" block.
func draftLua(b block, lua string, review []string) ([]step, []string) {
	calls := luaCallRE.FindAllStringIndex(lua, -1)
	var steps []step
	for _, m := range calls {
		args, ok := luaArgs(lua[m[1]:])
		if !ok || len(args) < 2 {
			review = append(review, "a t() call not understood")
			continue
		}
		uri, ok1 := luaString(args[0])
		mm := methodRE.FindStringSubmatch(strings.TrimSpace(args[1]))
		method := ""
		if mm != nil {
			method = mm[1]
		} else if s, ok := luaString(args[1]); ok {
			method = s
		}
		if !ok1 || method == "" {
			review = append(review, fmt.Sprintf("t(%s, %s) not understood", clipS(args[0]), clipS(args[1])))
			continue
		}
		s := step{req: method + " " + uri, status: "2xx"}
		if len(args) > 2 && strings.TrimSpace(args[2]) != "nil" {
			if body, ok := luaString(args[2]); ok {
				body = dedent(body)
				s.body = &body
			} else {
				s.reviewNote = "body is a Lua expression: " + clipS(args[2])
			}
		}
		if len(args) > 3 && strings.TrimSpace(args[3]) != "nil" {
			if pat, ok := luaString(args[3]); ok {
				s.json = dedent(pat)
			} else {
				s.reviewNote = strings.TrimSpace(s.reviewNote + "; pattern is a Lua expression")
			}
		}
		if len(args) > 4 {
			s.reviewNote = strings.TrimSpace(s.reviewNote + "; sends headers " + clipS(args[4]))
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 {
		return nil, append(review, "no lib/test_admin call: the Lua does something else")
	}
	rb, hasRB := b.secs["response_body"]
	code := strings.TrimSpace(b.secs["error_code"])
	if len(steps) == 1 && len(calls) == 1 && reencodeRE.MatchString(lua) && strings.HasPrefix(rb, "{") {
		// The Lua decodes the answer, drops some fields and prints the rest.
		s := &steps[0]
		s.json, s.status = "", "200"
		if strings.Contains(s.req, "PUT ") || strings.Contains(s.req, "PATCH ") || strings.Contains(s.req, "POST ") {
			s.status = "2xx"
		}
		eq := strings.TrimSuffix(rb, "\n")
		s.jsonEq = &eq
		for _, m := range nilFieldRE.FindAllStringSubmatch(lua, -1) {
			s.ignore = append(s.ignore, luaPath(m[1], lua))
		}
		for _, m := range assertFieldRE.FindAllStringSubmatch(lua, -1) {
			s.has = append(s.has, luaPath(m[1], lua))
		}
		review = dropLuaNotes(review)
		return steps, review
	}
	if len(steps) == 1 && len(calls) == 1 {
		s := &steps[0]
		m := codeLineRE.FindStringSubmatch(rb)
		switch {
		case m != nil && strings.Count(rb, "\n") == 1:
			setStatus(s, m)
		case hasRB && rb == "passed\n" && (code == "" || code == "200"):
		case code != "" && code != "200" && hasRB:
			s.status = code
			body := rb
			if strings.Contains(lua, "ngx.say(body)") || strings.Contains(lua, "ngx.say(message)") {
				body = strings.TrimSuffix(body, "\n")
				if !strings.HasSuffix(body, "\n") && strings.HasPrefix(body, "{") {
					body += "\n"
				}
			}
			s.respBody, s.json = &body, ""
		case code != "" && code != "200":
			s.status = code
			s.json = ""
		default:
			review = append(review, "response_body "+strconvQuote(rb)+" (decide the status and body)")
		}
	} else if codes := codeLineRE.FindAllStringSubmatch(rb, -1); len(codes) == len(steps) && len(steps) == len(calls) {
		for i, m := range codes {
			setStatus(&steps[i], m)
		}
		review = append(review, fmt.Sprintf("%d t() calls, statuses read from response_body %s", len(calls), strconvQuote(rb)))
	} else {
		review = append(review, fmt.Sprintf("%d t() calls; response_body %s error_code %q", len(calls), strconvQuote(rb), code))
	}
	if ms := etcdGetRE.FindAllStringSubmatch(lua, -1); len(ms) == 2 && ms[0][1] == ms[1][1] && strings.Contains(lua, "prev_create_time") {
		// GET before (timestamps), the calls, GET after: create_time kept,
		// update_time changed.
		before := step{req: "GET /apisix/admin/" + ms[0][1], status: "200", has: []string{"node.value.create_time", "node.value.update_time"},
			capture: [][2]string{{"created", "node.value.create_time"}, {"updated", "node.value.update_time"}}}
		pre := []step{before}
		if strings.Contains(lua, "ngx.sleep(1)") {
			pre = append(pre, step{sleep: "1.05"})
		}
		after := step{req: "GET /apisix/admin/" + ms[0][1], status: "200", json: `{"node":{"value":{"create_time":${created}}}}`, has: []string{"node.value.update_time"}}
		if strings.Contains(lua, "update_time should be changed") {
			after.ne = [][2]string{{"node.value.update_time", "${updated}"}}
		}
		steps = append(append(pre, steps...), after)
		lua = strings.ReplaceAll(strings.ReplaceAll(lua, "core.etcd", ""), "ngx.sleep", "")
	} else if m := etcdGetRE.FindStringSubmatch(lua); m != nil && strings.Contains(lua, "create_time ~= nil") && strings.Count(lua, "etcd.get(") == 1 &&
		strings.Index(lua, "etcd.get(") > calls[len(calls)-1][0] {
		steps = append(steps, step{req: "GET /apisix/admin/" + m[1], status: "200", has: []string{"node.value.create_time", "node.value.update_time"}})
		lua = strings.ReplaceAll(lua, "core.etcd", "")
	}
	for _, k := range []string{"ngx.sleep", "core.etcd", "require(\"resty.http\")", "for ", "json.decode", "ngx.say(core.json"} {
		if strings.Contains(lua, k) {
			review = append(review, "Lua uses "+strings.TrimSpace(k))
		}
	}
	return steps, review
}

// setStatus reads a "code: N message: M" line. lib/test_admin's t()
// reports 200 for any 2xx whose body matched the pattern, and the real
// status otherwise.
func setStatus(s *step, m []string) {
	s.status = m[1]
	switch {
	case m[1] == "200" && s.json != "":
		s.status = "2xx"
	case m[1] >= "300" || m[2] != "passed":
		s.json = ""
		if strings.HasPrefix(m[2], "{") {
			body := m[2] + "\n" // the admin API's body, as printed
			s.respBody = &body
		}
	}
}

var (
	etcdGetRE     = regexp.MustCompile(`etcd\.get\('/(\w+/[\w.-]+)'\)`)
	reencodeRE    = regexp.MustCompile(`json\.encode\(res\)`)
	nilFieldRE    = regexp.MustCompile(`(?m)^\s*((?:res|value)(?:\.\w+)+) = nil`)
	assertFieldRE = regexp.MustCompile(`assert\(((?:res|value)(?:\.\w+)+) ~= nil\)`)
)

// luaPath turns res.node.value.x (or value.x, value being res.node.value)
// into the dotted path node.value.x.
func luaPath(expr, lua string) string {
	if p, ok := strings.CutPrefix(expr, "value."); ok && strings.Contains(lua, "local value = res.node.value") {
		return "node.value." + p
	}
	return strings.TrimPrefix(expr, "res.")
}

// dropLuaNotes removes the notes the re-encoding idiom explains.
func dropLuaNotes(review []string) []string {
	var out []string
	for _, r := range review {
		if r != "Lua uses json.decode" && r != "Lua uses ngx.say(core.json" {
			out = append(out, r)
		}
	}
	return out
}

func strconvQuote(s string) string { return strconv.Quote(clipS(s)) }

func clipS(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

// luaArgs splits the arguments of a call whose "(" was just consumed.
func luaArgs(s string) ([]string, bool) {
	var args []string
	depth := 0
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		case c == '[' && (strings.HasPrefix(s[i:], "[[") || strings.HasPrefix(s[i:], "[=")):
			eq := 0
			for i+1+eq < len(s) && s[i+1+eq] == '=' {
				eq++
			}
			if i+1+eq >= len(s) || s[i+1+eq] != '[' {
				depth++
				continue
			}
			end := strings.Index(s[i:], "]"+strings.Repeat("=", eq)+"]")
			if end < 0 {
				return nil, false
			}
			i += end + 1 + eq
		case c == '(' || c == '{' || c == '[':
			depth++
		case c == ')' || c == '}' || c == ']':
			if depth == 0 && c == ')' {
				args = append(args, strings.TrimSpace(s[start:i]))
				return args, true
			}
			depth--
		case c == ',' && depth == 0:
			args = append(args, strings.TrimSpace(s[start:i]))
			start = i + 1
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			if nl := strings.IndexByte(s[i:], '\n'); nl >= 0 {
				i += nl
			}
		}
	}
	return nil, false
}

// luaString reads a Lua string literal.
func luaString(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		eq := strings.Count(s[1:strings.IndexByte(s[1:], '[')+1], "=")
		open, closing := "["+strings.Repeat("=", eq)+"[", "]"+strings.Repeat("=", eq)+"]"
		if strings.HasPrefix(s, open) && strings.HasSuffix(s, closing) {
			return strings.TrimPrefix(s[len(open):len(s)-len(closing)], "\n"), true
		}
		return "", false
	}
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		body := s[1 : len(s)-1]
		if strings.ContainsAny(body, string(s[0])) && !strings.Contains(body, `\`+string(s[0])) {
			return "", false // concatenation such as '/a' .. x .. '/b'
		}
		r := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\"`, `"`, `\'`, `'`, `\\`, `\`)
		return r.Replace(body), true
	}
	return "", false
}

// dedent removes the common indentation of every line but the first.
func dedent(s string) string {
	lines := strings.Split(strings.TrimRight(s, " \n"), "\n")
	minIndent := -1
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if minIndent < 0 || n < minIndent {
			minIndent = n
		}
	}
	for i := 1; i < len(lines) && minIndent > 0; i++ {
		if len(lines[i]) >= minIndent {
			lines[i] = lines[i][minIndent:]
		}
	}
	lines[0] = strings.TrimLeft(lines[0], " \t")
	return strings.Join(lines, "\n")
}

var (
	perlStrRE = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'`)
	perlQrRE  = regexp.MustCompile(`^qr\s*([/{!#|])((?s).*)[/}!#|]([a-z]*)$`)
)

func perlUnquote(m []string) string {
	if m[2] != "" || (m[1] == "" && strings.HasPrefix(m[0], "'")) {
		return strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[2])
	}
	return strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\"`, `"`, `\\`, `\`, `\$`, `$`, `\@`, `@`).Replace(m[1])
}

// perlStrings reads ["a", "b"] or a single "a".
func perlStrings(v string) ([]string, bool) {
	v = strings.TrimSpace(v)
	inner := v
	if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
		inner = v[1 : len(v)-1]
	}
	ms := perlStrRE.FindAllStringSubmatchIndex(inner, -1)
	if len(ms) == 0 {
		return nil, false
	}
	var out []string
	rest := inner
	for _, m := range ms {
		out = append(out, perlUnquote([]string{inner[m[0]:m[1]], sub(inner, m[2], m[3]), sub(inner, m[4], m[5])}))
	}
	rest = perlStrRE.ReplaceAllString(rest, "")
	if strings.Trim(rest, " ,\n\t") != "" {
		return nil, false
	}
	return out, true
}

func sub(s string, a, b int) string {
	if a < 0 {
		return ""
	}
	return s[a:b]
}

// perlConcat reads "a" . "b".
func perlConcat(v string) (string, bool) {
	parts := strings.Split(strings.TrimSpace(v), " . ")
	var b strings.Builder
	for _, p := range parts {
		l, ok := perlStrings(strings.TrimSpace(p))
		if !ok || len(l) != 1 {
			return "", false
		}
		b.WriteString(l[0])
	}
	return b.String(), true
}

// perlList reads [200, 503].
func perlList(v string) ([]string, bool) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") {
		return nil, false
	}
	var out []string
	for _, f := range strings.Split(v[1:len(v)-1], ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out, len(out) > 0
}

// perlRegex reads qr/…/ into a Go regular expression.
func perlRegex(v string) (string, bool) {
	m := perlQrRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return "", false
	}
	re := m[2]
	if strings.Contains(m[3], "s") {
		re = "(?s)" + re
	}
	if _, err := regexp.Compile(re); err != nil {
		return "", false
	}
	return re, true
}

func perlRegexes(v string) ([]string, bool) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") {
		return nil, false
	}
	var out []string
	for _, f := range splitTop(v[1 : len(v)-1]) {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		re, ok := perlRegex(f)
		if !ok {
			return nil, false
		}
		out = append(out, re)
	}
	return out, len(out) > 0
}

// splitTop splits on commas outside qr/…/.
func splitTop(s string) []string {
	var out []string
	in := byte(0)
	start := 0
	for i := 0; i < len(s); i++ {
		switch {
		case in == 0 && strings.HasPrefix(s[i:], "qr") && i+2 < len(s):
			in = s[i+2]
			if in == '{' {
				in = '}'
			}
			i += 2
		case in != 0 && s[i] == '\\':
			i++
		case in != 0 && s[i] == in:
			in = 0
		case in == 0 && s[i] == ',':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// render writes the draft as YAML.
func render(file, tag string, cases []draftCase, v3 bool) []byte {
	root := &yaml.Node{Kind: yaml.MappingNode}
	kv(root, "source", str(file))
	if tag != "2.14.1" {
		kv(root, "tag", str(tag))
	}
	if v3 {
		kv(root, "args", &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle, Content: []*yaml.Node{str("--admin-api-version"), str("v3")}})
	}
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for _, c := range cases {
		n := &yaml.Node{Kind: yaml.MappingNode}
		kv(n, "test", &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.Itoa(c.n)})
		kv(n, "name", str(c.title))
		if len(c.review) > 0 {
			kv(n, "review", str(strings.Join(c.review, "; ")))
		}
		if len(c.steps) > 0 {
			steps := &yaml.Node{Kind: yaml.SequenceNode}
			for _, s := range c.steps {
				steps.Content = append(steps.Content, renderStep(s))
			}
			kv(n, "steps", steps)
		}
		list.Content = append(list.Content, n)
	}
	kv(root, "cases", list)
	var buf bytes.Buffer
	buf.WriteString("# Re-expressed from apache/apisix " + tag + " " + file + " (drafted by tools/apisixt, checked by hand).\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}})
	return buf.Bytes()
}

func renderStep(s step) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	if s.sleep != "" {
		kv(n, "sleep", &yaml.Node{Kind: yaml.ScalarNode, Value: s.sleep})
		return n
	}
	if s.reviewNote != "" {
		kv(n, "review", str(s.reviewNote))
	}
	kv(n, "req", str(s.req))
	if len(s.headers) > 0 {
		h := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, p := range s.headers {
			kv(h, p[0], str(p[1]))
		}
		kv(n, "headers", h)
	}
	if s.body != nil {
		kv(n, "body", literal(*s.body))
	}
	if s.repeat > 1 {
		kv(n, "repeat", &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.Itoa(s.repeat)})
	}
	if s.count > 0 {
		kv(n, "count", &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.Itoa(s.count)})
	}
	w := &yaml.Node{Kind: yaml.MappingNode}
	if s.status != "" {
		kv(w, "status", &yaml.Node{Kind: yaml.ScalarNode, Value: s.status})
	}
	if s.respBody != nil {
		n := str(*s.respBody)
		if strings.Contains(*s.respBody, "\n") {
			n.Style = yaml.LiteralStyle
		}
		kv(w, "body", n)
	}
	if s.bodyLike != "" {
		kv(w, "body_like", str(s.bodyLike))
	}
	if s.json != "" {
		kv(w, "json", literal(s.json))
	}
	for _, l := range []struct {
		key  string
		vals []string
	}{{"has", s.has}, {"ignore", s.ignore}} {
		if len(l.vals) > 0 {
			seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, v := range l.vals {
				seq.Content = append(seq.Content, str(v))
			}
			kv(w, l.key, seq)
		}
	}
	if s.jsonEq != nil {
		kv(w, "json_eq", literal(*s.jsonEq))
	}
	if len(s.counts) > 0 {
		h := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, p := range s.counts {
			h.Content = append(h.Content, str(p[0]), &yaml.Node{Kind: yaml.ScalarNode, Value: p[1]})
		}
		key := "counts"
		if s.countStatus {
			key = "status_counts"
		}
		kv(w, key, h)
	}
	if len(s.ne) > 0 {
		h := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, p := range s.ne {
			kv(h, p[0], str(p[1]))
		}
		kv(w, "ne", h)
	}
	if len(s.respHdrs) > 0 {
		h := &yaml.Node{Kind: yaml.MappingNode}
		for _, p := range s.respHdrs {
			if p[1] == "\x00" {
				kv(h, p[0], &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"})
			} else {
				kv(h, p[0], str(p[1]))
			}
		}
		kv(w, "headers", h)
	}
	if len(s.hdrsLike) > 0 {
		h := &yaml.Node{Kind: yaml.MappingNode}
		for _, p := range s.hdrsLike {
			kv(h, p[0], str(p[1]))
		}
		kv(w, "headers_like", h)
	}
	if len(w.Content) > 0 {
		kv(n, "want", w)
	}
	if len(s.capture) > 0 {
		h := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, p := range s.capture {
			kv(h, p[0], str(p[1]))
		}
		kv(n, "capture", h)
	}
	return n
}

func kv(m *yaml.Node, k string, v *yaml.Node) {
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
}

func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func literal(s string) *yaml.Node {
	if json.Valid([]byte(s)) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(s)) == nil && buf.Len() <= 110 {
			s = buf.String()
		} else if buf.Reset(); json.Indent(&buf, []byte(s), "", "  ") == nil {
			s = buf.String()
		}
	}
	n := str(s)
	if strings.Contains(s, "\n") {
		n.Style = yaml.LiteralStyle
	}
	return n
}
