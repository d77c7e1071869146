package conformance

import (
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// Upstream is the test upstream APISIX's suite proxies to: the server on
// 127.0.0.1:1980, 1981, 1982 (and 1983 with TLS) that t/APISIX.pm runs with
// t/lib/server.lua. This is a Go re-implementation of the endpoints the
// ported cases use, written from their observable behaviour: the action
// is the path with "/", "." and "-" turned into "_" (/server_port →
// server_port), request headers "resp-X: v" come back as "X: v", and an
// unknown action is nginx's 404 page. Each listener answers as the port
// it stands for (server_port says 1981, not its real port).
type Upstream struct {
	servers []*httptest.Server
	// Addrs maps a logical port (1980) to the real "127.0.0.1:PORT".
	Addrs map[int]string
	// Addr6 is the real "[::1]:PORT" of [::1]:1980 (listen_ipv6), or "".
	Addr6 string
}

// Logical ports of the test upstream; 1983 is TLS.
var upstreamPorts = []int{1980, 1981, 1982, 1983}

// StartUpstream starts the test upstream on 127.0.0.1:1980–1983 when
// those ports are free (always in make test's network namespace), else on
// random ports. The real ports matter to consistent hashing: a node's
// place on the chash ring comes from its address, so only on 1980–1983 do
// keys pick the nodes APISIX's tests expect.
func StartUpstream() (*Upstream, error) {
	u := &Upstream{Addrs: map[int]string{}}
	for _, port := range upstreamPorts {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err != nil {
			u.Close()
			return nil, err
		}
		s := httptest.NewUnstartedServer(&upstreamHandler{port: port})
		s.Listener.Close()
		s.Listener = ln
		s.Config.ErrorLog = nil
		if port == 1983 {
			s.StartTLS()
			s.TLS.MinVersion = tls.VersionTLS12
		} else {
			s.Start()
		}
		u.servers = append(u.servers, s)
		u.Addrs[port] = ln.Addr().String()
	}
	ln6, err := net.Listen("tcp", "[::1]:1980")
	if err != nil {
		ln6, err = net.Listen("tcp", "[::1]:0")
	}
	if ln := ln6; err == nil {
		s := httptest.NewUnstartedServer(&upstreamHandler{port: 1980})
		s.Listener.Close()
		s.Listener = ln
		s.Start()
		u.servers = append(u.servers, s)
		u.Addr6 = ln.Addr().String()
	}
	return u, nil
}

// Fixed reports whether the upstream is on its logical ports.
func (u *Upstream) Fixed() bool {
	for port, addr := range u.Addrs {
		if addr != "127.0.0.1:"+strconv.Itoa(port) {
			return false
		}
	}
	return true
}

// Close stops every listener.
func (u *Upstream) Close() {
	for _, s := range u.servers {
		s.Close()
	}
}

type upstreamHandler struct{ port int }

// nginxPage is nginx's error page with server_tokens off.
func nginxPage(status int) string {
	text := strconv.Itoa(status) + " " + nginxStatusText(status)
	return "<html>\r\n<head><title>" + text + "</title></head>\r\n<body>\r\n<center><h1>" + text +
		"</h1></center>\r\n<hr><center>openresty</center>\r\n</body>\r\n</html>\r\n"
}

// nginxStatusText is nginx's reason phrase where it differs from Go's.
func nginxStatusText(status int) string {
	switch status {
	case 504:
		return "Gateway Time-out"
	case 413:
		return "Request Entity Too Large"
	case 414:
		return "Request-URI Too Large"
	case 302:
		return "Moved Temporarily"
	}
	return http.StatusText(status)
}

func (h *upstreamHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Server", "openresty")
	w.Header().Set("Content-Type", "text/plain")
	w.Header()["Date"] = nil // more_clear_headers Date
	action := strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(strings.TrimPrefix(r.URL.Path, "/"))
	fn, ok := upstreamActions[action]
	if !ok && strings.HasPrefix(action, "print_uri_") {
		if n, err := strconv.Atoi(strings.TrimPrefix(action, "print_uri_")); err == nil && n >= 1 && n <= 100 {
			fn, ok = printURI, true
		}
	}
	if !ok {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, nginxPage(http.StatusNotFound))
		return
	}
	for k, vs := range r.Header {
		if name, ok := strings.CutPrefix(strings.ToLower(k), "resp-"); ok {
			w.Header()[http.CanonicalHeaderKey(name)] = vs
		}
	}
	// A Content-Length asked for with resp-Content-Length is what the body
	// is cut to (net/http would refuse the whole write and drop the
	// connection; response-rewrite.t TEST 7 replaces that body anyway).
	if n, err := strconv.Atoi(w.Header().Get("Content-Length")); err == nil {
		w = &cutWriter{ResponseWriter: w, left: n}
	}
	fn(h, w, r)
}

// cutWriter writes at most left bytes of the body.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (c *cutWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > c.left {
		p = p[:c.left]
	}
	c.left -= len(p)
	if _, err := c.ResponseWriter.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

type action func(h *upstreamHandler, w http.ResponseWriter, r *http.Request)

var upstreamActions map[string]action

func init() {
	serverPort := func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strconv.Itoa(h.port))
	}
	uri := func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
		printHeaders(w, r, "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port")
	}
	upstreamActions = map[string]action{
		"hello": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Length", "12")
			io.WriteString(w, "hello world\n")
		},
		"hello_chunked": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			f, _ := w.(http.Flusher)
			for _, part := range []string{"hell", "o w", "orld\n"} {
				io.WriteString(w, part)
				if f != nil {
					f.Flush()
				}
			}
		},
		"websocket_handshake":       websocketHandshake,
		"websocket_handshake_route": websocketHandshake,
		"hello1":                    say("hello1 world"),
		"course_foo":                say("course foo"),
		"opentracing":               say("opentracing"),
		"server_port":               serverPort,
		"server_port_route2":        serverPort,
		"server_port_hello":         serverPort,
		"server_port_aa":            serverPort,
		"limit_conn": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			time.Sleep(300 * time.Millisecond)
			io.WriteString(w, "hello world\n")
		},
		"plugin_proxy_rewrite": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			fmt.Fprintf(w, "uri: %s\nhost: %s\nscheme: %s\n", r.URL.Path, hostOnly(r.Host), scheme)
		},
		// 3.x's: the path nginx matched (decoded) and the request line's URI.
		"print_uri_detailed": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "ngx.var.uri: %s\nngx.var.request_uri: %s\n", r.URL.Path, r.RequestURI)
		},
		// 3.x's: each request header line as "name: value", names sorted,
		// a repeated header once per line (X-Forwarded-* left out).
		"plugin_proxy_rewrite_multi_header": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			hdr := map[string][]string{"host": {r.Host}}
			for k, vs := range r.Header {
				if k := strings.ToLower(k); !slices.Contains([]string{"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port"}, k) {
					hdr[k] = append(hdr[k], vs...)
				}
			}
			for _, k := range slices.Sorted(maps.Keys(hdr)) {
				for _, v := range hdr[k] {
					fmt.Fprintf(w, "%s: %s\n", k, v)
				}
			}
		},
		"plugin_proxy_rewrite_args": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "uri: %s\n", r.URL.Path)
			q := r.URL.Query()
			for _, k := range slices.Sorted(maps.Keys(q)) {
				fmt.Fprintf(w, "%s: %s\n", k, strings.Join(q[k], ","))
			}
		},
		"specific_status": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			if s := r.Header.Get("X-Test-Upstream-Status"); s != "" {
				code, _ := strconv.Atoi(s)
				w.WriteHeader(code)
				fmt.Fprintf(w, "upstream status: %s\n", s)
			}
		},
		"status": say("ok"),
		"ewma": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			if h.port == 1981 || h.port == 1982 {
				time.Sleep(200 * time.Millisecond)
			} else {
				time.Sleep(100 * time.Millisecond)
			}
			io.WriteString(w, strconv.Itoa(h.port))
		},
		"uri":                           uri,
		"uri_plugin_proxy_rewrite":      uri,
		"uri_plugin_proxy_rewrite_args": uri,
		"old_uri":                       func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) { printHeaders(w, r) },
		"with_header":                   say("hello\nworld\n!"),
		"api_breaker": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			code, _ := strconv.Atoi(r.URL.Query().Get("code"))
			if code < 100 {
				code = 500
			}
			// ngx.exit(code): nginx's error page for an error, else an
			// empty body of the server's default_type.
			if code >= 300 {
				w.Header().Set("Content-Type", "text/html")
			} else {
				w.Header().Set("Content-Type", "text/plain")
			}
			w.WriteHeader(code)
			if code >= 400 {
				io.WriteString(w, nginxPage(code))
			}
		},
		"mysleep": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			secs, _ := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64)
			select {
			case <-time.After(time.Duration(secs * float64(time.Second))):
			case <-r.Context().Done():
				return
			}
			if r.URL.Query().Has("abort") {
				panic(http.ErrAbortHandler) // ngx.exit(ngx.ERROR): close without answering
			}
			fmt.Fprintf(w, "%s\n", r.URL.Query().Get("seconds"))
		},
		"headers": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			for k, vs := range r.URL.Query() {
				w.Header()[http.CanonicalHeaderKey(k)] = vs
			}
			io.WriteString(w, "/headers\n")
		},
		"echo": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			for k, vs := range r.Header {
				w.Header()[k] = vs
			}
			// ngx.req.get_headers has Host; net/http keeps it apart.
			w.Header().Set("Host", r.Host)
			w.Header().Del("Content-Length")
			w.Write(b)
		},
		"log": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		},
		"log_request": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		},
		"server_error": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			// The Lua error lands in the test server's @50x.html location,
			// APISIX's error_handling page.
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "<!DOCTYPE html>\n<html>\n<head><title>500 Internal Server Error</title></head>\n<body>\n"+
				"<h1>An error occurred.</h1>\n<p>(the error page of APISIX's test server: https://apisix.apache.org/)</p>\n</body>\n</html>\n")
		},
		"plugin_proxy_rewrite_resp_header": func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			s := "plugin_proxy_rewrite_resp_header\n"
			w.Header().Set("Content-Length", strconv.Itoa(len(s)))
			io.WriteString(w, s)
		},
	}
}

// websocketHandshake is server.lua's websocket_handshake: a WebSocket
// server (gorilla/websocket for lua-resty-websocket) that sends "hello"
// and closes; a request that is not an upgrade gets nginx's 400.
func websocketHandshake(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{
		Subprotocols: websocket.Subprotocols(r), // resty.websocket.server echoes the protocol
		CheckOrigin:  func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, _ *http.Request, status int, _ error) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			io.WriteString(w, nginxPage(status))
		},
	}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.WriteMessage(websocket.TextMessage, []byte("hello"))
}

func say(s string) action {
	return func(h *upstreamHandler, w http.ResponseWriter, r *http.Request) { io.WriteString(w, s+"\n") }
}

func printURI(h *upstreamHandler, w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, r.URL.Path+"\n")
}

// printHeaders writes "uri: PATH" and then "name: value" for each request
// header, lower-case and sorted, as ngx.req.get_headers() gives them (a
// repeated header is a Lua table, printed as its values joined).
func printHeaders(w http.ResponseWriter, r *http.Request, ignore ...string) {
	fmt.Fprintf(w, "uri: %s\n", r.URL.Path)
	hdr := map[string][]string{"host": {r.Host}}
	for k, vs := range r.Header {
		hdr[strings.ToLower(k)] = vs
	}
	if r.ContentLength > 0 && hdr["content-length"] == nil {
		hdr["content-length"] = []string{strconv.FormatInt(r.ContentLength, 10)}
	}
	for _, k := range slices.Sorted(maps.Keys(hdr)) {
		if slices.Contains(ignore, k) {
			continue
		}
		fmt.Fprintf(w, "%s: %s\n", k, strings.Join(hdr[k], ""))
	}
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// StartPortServers starts a server for each logical port that answers
// every request with that port number, as a .t file's fake servers do
// (ngx.say(1970)), and returns Addrs with them added; stop closes them.
func (u *Upstream) StartPortServers(ports []int) (addrs map[int]string, stop func(), err error) {
	addrs = maps.Clone(u.Addrs)
	var servers []*httptest.Server
	stop = func() {
		for _, s := range servers {
			s.Close()
		}
	}
	for _, port := range ports {
		body := strconv.Itoa(port) + "\n"
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
		s.Config.ErrorLog = nil
		servers = append(servers, s)
		addrs[port] = s.Listener.Addr().String()
	}
	return addrs, stop, nil
}
