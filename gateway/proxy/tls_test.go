package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/linkgate/linkgate/gateway/certs"
	"github.com/linkgate/linkgate/gateway/plugin/prometheus"
	"github.com/linkgate/linkgate/gateway/proxy"
	"github.com/linkgate/linkgate/internal/testcert"
)

// tlsGateway is a gateway serving both listeners, with a certificate for
// test.com and *.test.com signed by ca.
type tlsGateway struct {
	*gw
	tlsAddr string
	ca      *testcert.CA
	certs   *certs.Manager
}

// opts.Certs, when set, is used instead of a new certs.Manager.
func startTLSGateway(t testing.TB, opts proxy.Options) *tlsGateway {
	t.Helper()
	ca := testcert.NewCA(t, "proxy test CA")
	if opts.Certs == nil {
		opts.Certs = certs.NewManager(nil)
	}
	m := opts.Certs
	if opts.ServerHeader == "" {
		opts.ServerHeader = "linkgate"
	}
	w := startGatewayWith(t, opts)
	// Through the configuration pipeline, as from a store.
	pair := ca.Issue(t, testcert.Options{DNS: []string{"test.com", "*.test.com"}})
	ssl, _ := json.Marshal(map[string]any{"cert": pair.CertPEM, "key": pair.KeyPEM, "snis": []string{"test.com", "*.test.com"}})
	w.load(t, map[string]string{"ssl/1": string(ssl)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.g.ServeTLS(ln) }()
	return &tlsGateway{gw: w, tlsAddr: ln.Addr().String(), ca: ca, certs: m}
}

// clientFor is an HTTPS client of the gateway speaking h2 or HTTP/1.1.
func (w *tlsGateway) clientFor(h2 bool) *http.Client {
	cfg := &tls.Config{ServerName: "www.test.com", RootCAs: w.ca.Pool()}
	var protos http.Protocols
	protos.SetHTTP1(!h2)
	protos.SetHTTP2(h2)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, Protocols: &protos}, Timeout: 10 * time.Second}
}

func (w *tlsGateway) url(path string) string { return "https://" + w.tlsAddr + path }

// TestTLSListener: HTTP/1.1 and HTTP/2 over TLS reach the same routes and
// plugins as cleartext, with X-Forwarded-Proto https and the gateway's
// headers.
func TestTLSListener(t *testing.T) {
	w := startTLSGateway(t, proxy.Options{})
	node := upstream(t, "u1", nil)
	w.load(t, map[string]string{
		"routes/1": `{"uri":"/hello","plugins":{"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`,
		"routes/2": `{"uri":"/proto","plugins":{"proxy-rewrite":{"headers":{"X-Proto":"$server_protocol $scheme"}}},"upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`,
	})
	for _, h2 := range []bool{false, true} {
		name := map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2]
		t.Run(name, func(t *testing.T) {
			c := w.clientFor(h2)
			resp, err := c.Get(w.url("/hello?a=1"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			wantProto := map[bool]int{false: 1, true: 2}[h2]
			if resp.ProtoMajor != wantProto {
				t.Errorf("protocol %s", resp.Proto)
			}
			if resp.StatusCode != 200 || !strings.Contains(string(body), "u1 /hello?a=1 ") || !strings.Contains(string(body), "xfp=https ") {
				t.Errorf("%d %q", resp.StatusCode, body)
			}
			if resp.Header.Get("Server") != "linkgate" || resp.Header.Get("X-Upstream") != "u1" {
				t.Errorf("headers %v", resp.Header)
			}
			resp, err = c.Get(w.url("/nope"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 404 || !strings.Contains(string(body), "404 Route Not Found") {
				t.Errorf("no route: %d %q", resp.StatusCode, body)
			}
			// A POST body goes through as well.
			resp, err = c.Post(w.url("/hello"), "text/plain", strings.NewReader("payload"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("POST: %d", resp.StatusCode)
			}
		})
	}
	rec := httptest.NewRecorder()
	w.prom.Handler(func() prometheus.ServerStats { return prometheus.ServerStats{} }, func() bool { return true }).
		ServeHTTP(rec, httptest.NewRequest("GET", prometheus.ExportURI, nil))
	if !strings.Contains(rec.Body.String(), `matched_uri="/hello",node="127.0.0.1",route="1",service=""} 4`) {
		t.Errorf("TLS requests are not in the metrics:\n%s", rec.Body.String())
	}
}

// TestTLSHandshakeFailures: a client asking for an unknown name, or
// opening a connection and sending nothing, is dropped; the listener
// keeps serving.
func TestTLSHandshakeFailures(t *testing.T) {
	w := startTLSGateway(t, proxy.Options{HandshakeTimeout: 200 * time.Millisecond})
	_, err := tls.Dial("tcp", w.tlsAddr, &tls.Config{ServerName: "other.org", RootCAs: w.ca.Pool()})
	if err == nil || !strings.Contains(err.Error(), "remote error: tls: internal error") {
		t.Errorf("unknown SNI: %v, want the internal_error alert APISIX sends", err)
	}
	// The handshake timeout runs from the gateway's accept, which may come
	// before Dial returns here: the time before dialling bounds it.
	start := time.Now()
	c, err := net.Dial("tcp", w.tlsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a silent client was not dropped within 5s")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("dropped after %v, before the handshake timeout", d)
	}
	resp, err := w.clientFor(true).Get(w.url("/x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// h2conn opens a raw HTTP/2 connection for frame-level tests.
func h2conn(t *testing.T, w *tlsGateway) (*tls.Conn, *http2.Framer) {
	t.Helper()
	c, err := tls.Dial("tcp", w.tlsAddr, &tls.Config{ServerName: "test.com", RootCAs: w.ca.Pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, bufio.NewReader(c))
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c, fr
}

func headerBlock(t *testing.T, fields ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]}); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// TestHTTP2Limits: the server announces its stream cap; a header block
// larger than the limit ends that connection's request, not the server.
func TestHTTP2Limits(t *testing.T) {
	w := startTLSGateway(t, proxy.Options{MaxConcurrentStreams: 7, MaxHeaderBytes: 4 << 10})
	c, fr := h2conn(t, w)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %T, want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != 7 {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d, %v; want 7", v, ok)
	}
	if v, ok := sf.Value(http2.SettingMaxHeaderListSize); !ok || v > 8<<10 {
		t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE = %d, %v", v, ok)
	}
	big := headerBlock(t, ":method", "GET", ":scheme", "https", ":authority", "test.com", ":path", "/", "x-big", strings.Repeat("a", 64<<10))
	// Sent in 16 KiB frames, the block exceeds what the server accepts.
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: big[:16<<10], EndStream: true}); err != nil {
		t.Fatal(err)
	}
	for rest := big[16<<10:]; len(rest) > 0; {
		n := min(len(rest), 16<<10)
		if err := fr.WriteContinuation(1, n == len(rest), rest[:n]); err != nil {
			break // the server may close first
		}
		rest = rest[n:]
	}
	var status string
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		if hf, ok := f.(*http2.HeadersFrame); ok {
			fields, _ := hpack.NewDecoder(4096, nil).DecodeFull(hf.HeaderBlockFragment())
			for _, fl := range fields {
				if fl.Name == ":status" {
					status = fl.Value
				}
			}
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			status += " goaway"
			break
		}
	}
	if status != "431" && !strings.Contains(status, "goaway") {
		t.Errorf("oversized header block answered %q, want 431 or GOAWAY", status)
	}
	// Other connections are not affected.
	resp, err := w.clientFor(true).Get(w.url("/x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("after the oversized block: %d", resp.StatusCode)
	}
}
