// Package lua runs wrk-compatible Lua scripts (Lua 5.1, through
// github.com/yuin/gopher-lua) as request sources for linkgate bench.
//
// A script sees the wrk table (scheme, host, port, method, path, headers,
// body, thread, format, lookup, connect) and may define setup(thread),
// init(args), request(), response(status, headers, body) and
// done(summary, latency, requests), as documented for wrk. Each thread has its
// own Lua state. A script without request() is static: its request is built
// once per thread from wrk.method, wrk.path, wrk.headers and wrk.body and then
// sent without calling Lua at all.
package lua

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/linkgate/linkgate/bench"
)

// Options describe the run a script is loaded for.
type Options struct {
	Path    string       // the script file
	URL     *url.URL     // the target: wrk.scheme, host, port, path
	Headers bench.Fields // -H headers: the initial wrk.headers
	Args    []string     // arguments after --, for init(args)
	Stdout  io.Writer    // where print and io.write go
}

// Script is a loaded script. Its main state runs setup() and done(); each
// thread gets a state of its own from NewRequester.
type Script struct {
	o       Options
	name    string
	proto   *lua.FunctionProto
	out     *syncWriter
	main    *lua.LState
	mu      sync.Mutex // guards main and states
	states  []*lua.LState
	hasDone bool
}

// SyntaxError is a script that does not compile.
type SyntaxError struct {
	Path string
	Err  error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("lua script %s: syntax error: %v", e.Path, e.Err)
}
func (e *SyntaxError) Unwrap() error { return e.Err }

// Load reads and compiles the script and runs it once in the main state.
func Load(o Options) (*Script, error) {
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	src, err := os.ReadFile(o.Path)
	if err != nil {
		return nil, fmt.Errorf("lua script: %w", err)
	}
	name := filepath.Base(o.Path)
	chunk, err := parse.Parse(bytes.NewReader(src), name)
	if err != nil {
		return nil, &SyntaxError{Path: o.Path, Err: errors.New(strings.TrimSpace(err.Error()))}
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, &SyntaxError{Path: o.Path, Err: err}
	}
	s := &Script{o: o, name: name, proto: proto, out: &syncWriter{w: o.Stdout}}
	if s.main, err = s.newState(); err != nil {
		return nil, err
	}
	s.states = append(s.states, s.main)
	s.hasDone = s.main.GetGlobal("done").Type() == lua.LTFunction
	return s, nil
}

// Close releases every Lua state.
func (s *Script) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, L := range s.states {
		L.Close()
	}
	s.states = nil
}

// HasDone reports whether the script defines done().
func (s *Script) HasDone() bool { return s.hasDone }

// newState makes a Lua state with the wrk table and runs the script in it.
func (s *Script) newState() (*lua.LState, error) {
	L := lua.NewState()
	L.SetGlobal("print", L.NewFunction(s.print))
	if io, ok := L.GetGlobal("io").(*lua.LTable); ok {
		io.RawSetString("write", L.NewFunction(s.write))
	}
	u := s.o.URL
	wrk := L.NewTable()
	wrk.RawSetString("scheme", lua.LString(u.Scheme))
	wrk.RawSetString("host", lua.LString(u.Hostname()))
	if p := u.Port(); p != "" {
		wrk.RawSetString("port", lua.LString(p))
	}
	wrk.RawSetString("method", lua.LString("GET"))
	wrk.RawSetString("path", lua.LString(u.RequestURI()))
	headers := L.NewTable()
	for _, h := range s.o.Headers {
		headers.RawSetString(h.Name, lua.LString(h.Value))
	}
	wrk.RawSetString("headers", headers)
	wrk.RawSetString("format", L.NewFunction(s.format))
	wrk.RawSetString("request", L.NewFunction(s.format)) // wrk.request(): the request wrk.format() builds
	wrk.RawSetString("lookup", L.NewFunction(lookup))
	wrk.RawSetString("connect", L.NewFunction(connect))
	L.SetGlobal("wrk", wrk)

	L.Push(L.NewFunctionFromProto(s.proto))
	if err := L.PCall(0, 0, nil); err != nil {
		L.Close()
		return nil, fmt.Errorf("lua script %s: %w", s.o.Path, err)
	}
	// As wrk.init does, default the Host header before init() runs.
	if wrkTable(L).RawGetString("headers").(*lua.LTable).RawGetString("Host") == lua.LNil {
		hdrs, _ := wrkTable(L).RawGetString("headers").(*lua.LTable)
		if hdrs != nil {
			hdrs.RawSetString("Host", lua.LString(bench.HostHeader(u.Hostname(), u.Port())))
		}
	}
	return L, nil
}

func wrkTable(L *lua.LState) *lua.LTable {
	t, _ := L.GetGlobal("wrk").(*lua.LTable)
	if t == nil {
		L.RaiseError("the global wrk table was replaced")
	}
	return t
}

// NewRequester makes thread's Lua state: setup(thread) in the main state,
// then init(args) in the thread's, then a static request or a request()
// caller.
func (s *Script) NewRequester(thread int) (bench.Requester, error) {
	L, err := s.newState()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.states = append(s.states, L)
	s.mu.Unlock()
	th := &threadRef{L: L, id: thread, addr: net.JoinHostPort(s.o.URL.Hostname(), portOr80(s.o.URL))}
	ud := newThread(L, th)
	wrkTable(L).RawSetString("thread", ud)
	if setup, ok := s.main.GetGlobal("setup").(*lua.LFunction); ok {
		s.mu.Lock()
		err := s.main.CallByParam(lua.P{Fn: setup, Protect: true}, newThread(s.main, th))
		s.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("lua script %s: setup: %w", s.o.Path, err)
		}
	}
	if init, ok := L.GetGlobal("init").(*lua.LFunction); ok {
		args := L.NewTable()
		for _, a := range s.o.Args {
			args.Append(lua.LString(a))
		}
		if err := L.CallByParam(lua.P{Fn: init, Protect: true}, args); err != nil {
			return nil, fmt.Errorf("lua script %s: init: %w", s.o.Path, err)
		}
	}
	response, _ := L.GetGlobal("response").(*lua.LFunction)
	request, dynamic := L.GetGlobal("request").(*lua.LFunction)
	if !dynamic {
		req, err := formatFrom(L, lua.LNil, lua.LNil, lua.LNil, lua.LNil)
		if err != nil {
			return nil, fmt.Errorf("lua script %s: %w", s.o.Path, err)
		}
		if response != nil {
			return &staticResponder{Static: req, r: responder{L: L, fn: response, path: s.o.Path}}, nil
		}
		return req, nil
	}
	d := &dynamicRequester{L: L, fn: request, path: s.o.Path}
	if response != nil {
		return &dynamicResponder{dynamicRequester: d, r: responder{L: L, fn: response, path: s.o.Path}}, nil
	}
	return d, nil
}

func portOr80(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	return "80"
}

// dynamicRequester calls the script's request() for every request.
type dynamicRequester struct {
	L    *lua.LState
	fn   *lua.LFunction
	path string
}

func (d *dynamicRequester) Request(dst []byte) ([]byte, error) {
	if err := d.L.CallByParam(lua.P{Fn: d.fn, NRet: 1, Protect: true}); err != nil {
		return dst, fmt.Errorf("lua script %s: request: %w", d.path, err)
	}
	v := d.L.Get(-1)
	d.L.Pop(1)
	s, ok := v.(lua.LString)
	if !ok {
		return dst, fmt.Errorf("lua script %s: request() returned %s, want a string (use wrk.format)", d.path, v.Type())
	}
	return append(dst, s...), nil
}

// responder calls the script's response(status, headers, body).
type responder struct {
	L    *lua.LState
	fn   *lua.LFunction
	path string
}

func (r *responder) Response(res *bench.Response) error {
	headers := r.L.CreateTable(0, len(res.Headers))
	for _, h := range res.Headers {
		headers.RawSetString(string(h.Name), lua.LString(h.Value))
	}
	err := r.L.CallByParam(lua.P{Fn: r.fn, Protect: true},
		lua.LNumber(res.Status), headers, lua.LString(res.Body))
	if err != nil {
		return fmt.Errorf("lua script %s: response: %w", r.path, err)
	}
	return nil
}

type staticResponder struct {
	bench.Static
	r responder
}

func (s *staticResponder) Response(res *bench.Response) error { return s.r.Response(res) }

type dynamicResponder struct {
	*dynamicRequester
	r responder
}

func (d *dynamicResponder) Response(res *bench.Response) error { return d.r.Response(res) }

// format is wrk.format(method, path, headers, body).
func (s *Script) format(L *lua.LState) int {
	req, err := formatFrom(L, L.Get(1), L.Get(2), L.Get(3), L.Get(4))
	if err != nil {
		L.RaiseError("wrk.format: %v", err)
	}
	L.Push(lua.LString(req))
	return 1
}

// formatFrom builds a request from the arguments, each defaulting to the
// wrk table's field, as wrk.format does.
func formatFrom(L *lua.LState, method, path, headers, body lua.LValue) (bench.Static, error) {
	wrk := wrkTable(L)
	if method == lua.LNil {
		method = wrk.RawGetString("method")
	}
	if path == lua.LNil {
		path = wrk.RawGetString("path")
	}
	if headers == lua.LNil {
		headers = wrk.RawGetString("headers")
	}
	if body == lua.LNil {
		body = wrk.RawGetString("body")
	}
	var fields bench.Fields
	if t, ok := headers.(*lua.LTable); ok {
		var err error
		t.ForEach(func(k, v lua.LValue) {
			if err == nil && (k.Type() != lua.LTString || !isScalar(v)) {
				err = fmt.Errorf("header %s = %s: names must be strings and values strings or numbers", k, v)
			}
			fields = append(fields, bench.Field{Name: k.String(), Value: v.String()})
		})
		if err != nil {
			return nil, err
		}
	}
	if _, ok := fields.Get("Host"); !ok {
		if hdrs, ok := wrk.RawGetString("headers").(*lua.LTable); ok {
			if h := hdrs.RawGetString("Host"); h != lua.LNil {
				fields = append(fields, bench.Field{Name: "Host", Value: h.String()})
			}
		}
	}
	var b []byte
	switch v := body.(type) {
	case lua.LString:
		b = []byte(v)
	case *lua.LNilType:
	default:
		return nil, fmt.Errorf("body must be a string, got %s", body.Type())
	}
	if method.Type() != lua.LTString || !isScalar(path) {
		return nil, errors.New("method and path must be strings")
	}
	return bench.AppendRequest(nil, method.String(), path.String(), fields, b), nil
}

func isScalar(v lua.LValue) bool {
	return v.Type() == lua.LTString || v.Type() == lua.LTNumber
}

// lookup is wrk.lookup(host, service): the addresses host:service resolves
// to, as "ip:port" strings.
func lookup(L *lua.LState) int {
	host, service := L.CheckString(1), L.CheckString(2)
	ips, err := net.LookupHost(host)
	if err != nil {
		L.RaiseError("wrk.lookup %s: %v", host, err)
	}
	port, err := net.LookupPort("tcp", service)
	if err != nil {
		L.RaiseError("wrk.lookup %s: %v", service, err)
	}
	t := L.NewTable()
	for _, ip := range ips {
		t.Append(lua.LString(net.JoinHostPort(ip, fmt.Sprint(port))))
	}
	L.Push(t)
	return 1
}

// connect is wrk.connect(addr): whether a TCP connection to addr succeeds.
func connect(L *lua.LState) int {
	c, err := net.DialTimeout("tcp", L.CheckString(1), time.Second)
	if err == nil {
		c.Close()
	}
	L.Push(lua.LBool(err == nil))
	return 1
}

func (s *Script) print(L *lua.LState) int {
	var b strings.Builder
	for i := 1; i <= L.GetTop(); i++ {
		if i > 1 {
			b.WriteByte('\t')
		}
		b.WriteString(L.ToStringMeta(L.Get(i)).String())
	}
	b.WriteByte('\n')
	s.out.WriteString(b.String())
	return 0
}

func (s *Script) write(L *lua.LState) int {
	var b strings.Builder
	for i := 1; i <= L.GetTop(); i++ {
		v := L.Get(i)
		if !isScalar(v) {
			L.ArgError(i, "string expected, got "+v.Type().String())
		}
		b.WriteString(v.String())
	}
	s.out.WriteString(b.String())
	L.Push(L.GetField(L.GetGlobal("io"), "stdout"))
	return 1
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) WriteString(str string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.w, str)
}
