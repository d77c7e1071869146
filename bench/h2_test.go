package bench_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testdep"
)

func h2config(u *url.URL, conns, streams int, d time.Duration, rate float64) bench.Config {
	c := config(u, 1, conns, d, rate)
	c.HTTP2, c.Streams = true, streams
	return c
}

func TestHTTP2OverTLS(t *testing.T) {
	p := newPKI(t)
	var h2, other atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			h2.Add(1)
		} else {
			other.Add(1)
		}
		w.Write([]byte("hello"))
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/")
	c := h2config(u, 2, 4, time.Second, 0)
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem")})
	res := run(t, c)
	if res.Requests < 50 || res.Errors.Total() != 0 || other.Load() != 0 || h2.Load() < res.Requests {
		t.Fatalf("%d requests, errors %+v; server saw %d HTTP/2 and %d other", res.Requests, res.Errors, h2.Load(), other.Load())
	}
	if res.HTTP2 == nil || res.HTTP2.Streams != 4 || res.TLS == nil || res.TLS.ALPN != "h2" || res.Bytes < 5*res.Requests {
		t.Errorf("HTTP/2 %+v, TLS %+v, %d bytes", res.HTTP2, res.TLS, res.Bytes)
	}
	var out bytes.Buffer
	if err := bench.WriteText(&out, res, bench.TextOptions{}); err != nil || !strings.Contains(out.String(), "HTTP/2: 2 connections × 4 streams") {
		t.Errorf("report: %v\n%s", err, out.String())
	}
	// A server that does not speak h2: a clear error before the run.
	plain, _ := tlsServer(t, p, func(w http.ResponseWriter, r *http.Request) {}, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	c = h2config(plain, 1, 1, time.Second, 0)
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem")})
	if _, err := bench.Run(t.Context(), c); err == nil || !strings.Contains(err.Error(), "h2") {
		t.Errorf("no h2 by ALPN: error %v", err)
	}
}

func TestHTTP2CleartextConstantRate(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(505)
		}
		if r.URL.Query().Get("fail") != "" {
			w.WriteHeader(503)
		}
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/")
	res := run(t, h2config(u, 2, 2, 2*time.Second, 200))
	// Every request planned in the window is recorded once, however late
	// the machine ran it; a response completes in the window for each but
	// those the end cut off.
	if n := res.Latency.TotalCount(); res.Errors.Total() != 0 || n != 400 || res.Requests+res.InFlightAtEnd+res.UnsentAtEnd != 400 {
		t.Errorf("h2c at 200 req/s for 2 s: %d latencies, %d requests, %d in flight and %d unsent at the end, errors %+v",
			n, res.Requests, res.InFlightAtEnd, res.UnsentAtEnd, res.Errors)
	}
	if res.Rate != 200 {
		t.Errorf("rate %v", res.Rate)
	}
	u.RawQuery = "fail=1"
	res = run(t, h2config(u, 1, 2, time.Second, 0))
	if res.Errors.Status[503] == 0 || res.Errors.Status[503] != res.Requests {
		t.Errorf("503s: %+v of %d", res.Errors.Status, res.Requests)
	}
}

// misbehavingH2 is a raw HTTP/2 (h2c) server that answers streams, resets
// some (REFUSED_STREAM, which the client sends again, and INTERNAL_ERROR,
// an error) and ends every connection with a GOAWAY after 10 streams.
func misbehavingH2(t *testing.T) (*url.URL, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				preface := make([]byte, len(http2.ClientPreface))
				if _, err := br.Read(preface); err != nil {
					return
				}
				bw := bufio.NewWriter(c)
				fr := http2.NewFramer(bw, br)
				fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
				_ = fr.WriteSettings()
				bw.Flush()
				var block bytes.Buffer
				enc := hpack.NewEncoder(&block)
				n := 0
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					h, ok := f.(*http2.MetaHeadersFrame)
					if !ok {
						if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
							_ = fr.WriteSettingsAck()
							bw.Flush()
						}
						continue
					}
					n++
					switch {
					case n == 3:
						_ = fr.WriteRSTStream(h.StreamID, http2.ErrCodeRefusedStream)
					case n == 5:
						_ = fr.WriteRSTStream(h.StreamID, http2.ErrCodeInternal)
					case n == 10:
						_ = fr.WriteGoAway(h.StreamID-2, http2.ErrCodeNo, nil)
						bw.Flush()
						time.Sleep(20 * time.Millisecond) // deliberate: the fake server lingers after its GOAWAY before it hangs up
						return
					default:
						block.Reset()
						_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
						_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.StreamID, BlockFragment: block.Bytes(), EndHeaders: true})
						_ = fr.WriteData(h.StreamID, true, []byte("ok"))
					}
					bw.Flush()
				}
			}()
		}
	}()
	u, _ := url.Parse("http://" + ln.Addr().String() + "/")
	return u, &conns
}

func TestHTTP2ResetsAndGoAway(t *testing.T) {
	u, conns := misbehavingH2(t)
	res := run(t, h2config(u, 1, 1, time.Second, 100))
	h := res.HTTP2
	if h.GoAways < 3 || h.Refused < 3 || h.Resets < 3 || conns.Load() < 4 {
		t.Errorf("GOAWAY %d, refused %d, RST_STREAM %d over %d connections: want each connection's", h.GoAways, h.Refused, h.Resets, conns.Load())
	}
	// The run went on: about 100 requests were planned; 7 of every 10
	// streams are answered, one is an error and two are sent again.
	if res.Requests < 50 || res.Errors.Read < h.Resets {
		t.Errorf("%d requests, errors %+v after %d resets", res.Requests, res.Errors, h.Resets)
	}
}

// TestHTTP2AgainstNginx runs --http2 against Debian's nginx with `ssl
// http2`, certificates made by the test (CI installs nginx).
func TestHTTP2AgainstNginx(t *testing.T) {
	nginx := testdep.Binary(t, "LINKGATE_TEST_NGINX", "nginx")
	p := newPKI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
	ssl_protocols TLSv1.2 TLSv1.3;
	server {
		listen %[2]s ssl http2;
		ssl_certificate %[3]s/server.pem;
		ssl_certificate_key %[3]s/server-key.pem;
		location / { return 200 "ok\n"; }
		location /missing { return 404; }
	}
}
`, dir, addr, p.dir)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	cmd.Stderr = os.Stderr
	// Its own process group, killed whole: SIGKILL to the master alone
	// left its worker running, re-parented to init (issue 32).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if !eventually.Within(10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Fatalf("nginx did not start: %s", b)
	}
	u, _ := url.Parse("https://" + addr + "/")
	c := h2config(u, 2, 8, time.Second, 0)
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem"), ServerName: "bench.test"})
	res := run(t, c)
	// nginx ends a connection with a GOAWAY after keepalive_requests (1000)
	// requests: the generator drains it and opens another, losing nothing.
	if res.Requests < 100 || res.Errors.Total() != 0 || res.TLS.ALPN != "h2" || (res.Requests > 2500 && res.HTTP2.GoAways == 0) {
		t.Errorf("nginx h2: %d requests, errors %+v, ALPN %q, %+v", res.Requests, res.Errors, res.TLS.ALPN, res.HTTP2)
	}
	u.Path = "/missing"
	c = h2config(u, 1, 4, time.Second, 200)
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem")})
	res = run(t, c)
	if res.Errors.Status[404] != res.Requests || res.Requests < 150 {
		t.Errorf("nginx h2 404s: %+v of %d requests", res.Errors.Status, res.Requests)
	}
}
