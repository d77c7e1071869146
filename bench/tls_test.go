package bench_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/internal/testdep"
)

// testPKI is a CA made for the test, a server certificate it signed for
// 127.0.0.1 and "bench.test", and a client certificate.
type testPKI struct {
	caPEM          []byte
	pool           *x509.CertPool
	server, client tls.Certificate
	dir            string // caPEM as ca.pem, the client's cert.pem and key.pem
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "bench.test"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: []string{"bench.test"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(k)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c, certPEM, keyPEM
	}
	p := &testPKI{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool(), dir: t.TempDir()}
	p.pool.AddCert(ca)
	var certPEM, keyPEM, serverPEM, serverKeyPEM []byte
	p.server, serverPEM, serverKeyPEM = issue(2, x509.ExtKeyUsageServerAuth)
	p.client, certPEM, keyPEM = issue(3, x509.ExtKeyUsageClientAuth)
	for name, b := range map[string][]byte{"ca.pem": p.caPEM, "cert.pem": certPEM, "key.pem": keyPEM,
		"server.pem": serverPEM, "server-key.pem": serverKeyPEM} {
		if err := os.WriteFile(filepath.Join(p.dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// tlsServer starts an https test server with the PKI's certificate; it
// records the server names the clients asked for.
func tlsServer(t testing.TB, p *testPKI, h http.HandlerFunc, mod func(*tls.Config)) (*url.URL, *sync.Map) {
	t.Helper()
	names := &sync.Map{}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{p.server},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			names.Store(hello.ServerName, true)
			return nil, nil
		},
	}
	if mod != nil {
		mod(srv.TLS)
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/")
	return u, names
}

func tlsOptions(t testing.TB, o bench.TLSOptions) *tls.Config {
	t.Helper()
	c, err := bench.NewTLSConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHTTPSKeepAlive(t *testing.T) {
	p := newPKI(t)
	var conns atomic.Int64
	u, names := tlsServer(t, p, func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			t.Error("request without TLS")
		}
		w.Write([]byte("ok"))
	}, func(c *tls.Config) {
		prev := c.GetConfigForClient
		c.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) { conns.Add(1); return prev(h) }
	})
	c := config(u, 2, 4, 10*time.Second, 0)
	c.Requests = 2000
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem"), ServerName: "bench.test"})
	res := run(t, c)
	if res.Requests != 2000 || res.Errors.Total() != 0 {
		t.Fatalf("requests %d, errors %+v", res.Requests, res.Errors)
	}
	if res.TLS == nil || res.TLS.Version != "TLS 1.3" || res.TLS.ALPN != "http/1.1" {
		t.Fatalf("TLS result %+v", res.TLS)
	}
	if n := res.TLS.Handshake.TotalCount(); n != 4 {
		t.Errorf("%d handshakes recorded, want one per connection (4)", n)
	}
	if got := conns.Load(); got != 5 {
		t.Errorf("server saw %d TLS connections, want 4 and the probe", got)
	}
	if _, ok := names.Load("bench.test"); !ok {
		t.Error("--sni bench.test was not sent")
	}
	if n := res.Latency.TotalCount(); n != res.Requests+res.InFlightAtEnd {
		t.Errorf("latency histogram holds %d, want the %d requests and %d in flight at the end", n, res.Requests, res.InFlightAtEnd)
	}
}

func TestHTTPSNewConnectionPerRequestResumes(t *testing.T) {
	p := newPKI(t)
	u, _ := tlsServer(t, p, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }, nil)
	c := config(u, 1, 2, 10*time.Second, 0)
	req := bench.Static(bench.AppendRequest(nil, "GET", "/", bench.Fields{{Name: "Host", Value: u.Host}, {Name: "Connection", Value: "close"}}, nil))
	c.NewRequester = func(int) (bench.Requester, error) { return req, nil }
	c.Requests = 200
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem")})
	res := run(t, c)
	if res.Requests != 200 || res.Errors.Total() != 0 {
		t.Fatalf("requests %d, errors %+v", res.Requests, res.Errors)
	}
	// The first connections open before the measured window starts.
	hs := res.TLS.Handshake.TotalCount()
	if hs < res.Requests-2 {
		t.Errorf("%d handshakes for %d requests with Connection: close, want one each", hs, res.Requests)
	}
	if res.TLS.Resumed < hs-4 {
		t.Errorf("%d of %d handshakes resumed a session, want all but the first per connection", res.TLS.Resumed, hs)
	}
}

// batchConn is a server's TCP connection whose writes, once batch is set,
// wait in buf until flush writes them in one go: what the client then
// reads arrives in one piece.
type batchConn struct {
	net.Conn
	batch bool
	buf   []byte
}

func (b *batchConn) Write(p []byte) (int, error) {
	if !b.batch {
		return b.Conn.Write(p)
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *batchConn) flush() error {
	_ = b.SetWriteDeadline(time.Time{}) // tls.Conn.CloseWrite set it to now
	_, err := b.Conn.Write(b.buf)
	return err
}

// TestHTTPSResponseAfterTheEnd is the run whose request quota is met by a
// response followed, in the same read, by another response and the
// server's close_notify: the second response completes past the end of
// the run, so it is in flight at the end, and the close_notify behind it
// is no read error. (Two connections whose responses arrive in the same
// epoll batch as the last one counted do the same, about one run in ten
// of TestHTTPSNewConnectionPerRequestResumes before the engine stopped
// reading at the end.)
func TestHTTPSResponseAfterTheEnd(t *testing.T) {
	p := newPKI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cfg := &tls.Config{Certificates: []tls.Certificate{p.server}}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				bc := &batchConn{Conn: nc}
				tc := tls.Server(bc, cfg)
				var got []byte
				buf := make([]byte, 4096)
				for strings.Count(string(got), "\r\n\r\n") < 2 {
					n, err := tc.Read(buf)
					if err != nil {
						return // the probe connection
					}
					got = append(got, buf[:n]...)
				}
				bc.batch = true
				tc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" +
					"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
				tc.CloseWrite() // close_notify
				bc.flush()
			}()
		}
	}()
	u, _ := url.Parse("https://" + ln.Addr().String() + "/")
	c := config(u, 1, 1, 10*time.Second, 0)
	get := bench.AppendRequest(nil, "GET", "/", bench.Fields{{Name: "Host", Value: u.Host}}, nil)
	req := bench.Static(append(append([]byte(nil), get...), get...)) // two pipelined
	c.NewRequester = func(int) (bench.Requester, error) { return req, nil }
	c.Requests = 1
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem")})
	res := run(t, c)
	if res.Requests != 1 || res.Errors.Total() != 0 || res.InFlightAtEnd != 1 {
		t.Errorf("requests %d, in flight at the end %d, errors %+v; want 1, 1 and none", res.Requests, res.InFlightAtEnd, res.Errors)
	}
}

func TestHTTPSCertificateErrors(t *testing.T) {
	p := newPKI(t)
	u, _ := tlsServer(t, p, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }, nil)
	c := config(u, 1, 1, time.Second, 0)
	c.Requests = 10
	// The system's roots do not know the test CA: a clear error before the run.
	c.TLS = tlsOptions(t, bench.TLSOptions{})
	if _, err := bench.Run(t.Context(), c); err == nil || !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), "--insecure") {
		t.Errorf("unverified certificate: error %v", err)
	}
	// A name the certificate does not hold.
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem"), ServerName: "other.test"})
	if _, err := bench.Run(t.Context(), c); err == nil || !strings.Contains(err.Error(), "other.test") {
		t.Errorf("wrong server name: error %v", err)
	}
	c.TLS = tlsOptions(t, bench.TLSOptions{Insecure: true})
	if res := run(t, c); res.Requests != 10 {
		t.Errorf("--insecure: %d requests", res.Requests)
	}
}

func TestHTTPSClientCertificate(t *testing.T) {
	p := newPKI(t)
	u, _ := tlsServer(t, p, func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			t.Error("no client certificate")
		}
		w.Write([]byte("ok"))
	}, func(c *tls.Config) { c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, p.pool })
	c := config(u, 1, 2, 5*time.Second, 0)
	c.Requests = 20
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem")})
	if _, err := bench.Run(t.Context(), c); err == nil {
		t.Error("no error without the client certificate the server requires")
	}
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem"),
		CertFile: filepath.Join(p.dir, "cert.pem"), KeyFile: filepath.Join(p.dir, "key.pem")})
	if res := run(t, c); res.Requests != 20 || res.Errors.Total() != 0 {
		t.Errorf("with the client certificate: %d requests, errors %+v", res.Requests, res.Errors)
	}
}

func TestNewTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "x")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	for _, o := range []bench.TLSOptions{
		{CAFile: filepath.Join(dir, "missing")},
		{CAFile: notPEM},
		{CertFile: notPEM},
		{CertFile: notPEM, KeyFile: notPEM},
	} {
		if _, err := bench.NewTLSConfig(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestHTTPSPathDoesNotAllocate(t *testing.T) {
	if testdep.Race {
		t.Skip("the race detector allocates")
	}
	p := newPKI(t)
	u, _ := url.Parse(tlsTargetProcess(t, p))
	c := config(u, 1, 8, time.Minute, 0)
	c.TLS = tlsOptions(t, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem")})
	allocs := func(n int64) uint64 {
		c.Requests = n
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		run(t, c)
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	allocs(2000) // warm up the process: goroutines, buffers
	// The difference between a long and a short run is what requests cost;
	// the handshakes (8 connections and the probe) cost both alike.
	short, long := allocs(2000), allocs(30000)
	perReq := (float64(long) - float64(short)) / 28000
	t.Logf("%d allocations for 2000 requests, %d for 30000: %.4f per request", short, long, perReq)
	// The generator's own code allocates nothing per request; crypto/tls
	// allocates one 24-byte reader per record it reads (readFromUntil).
	if perReq > 1.05 {
		t.Errorf("%.4f allocations per request, want crypto/tls's one per response record and no more", perReq)
	}
}

func BenchmarkClosedLoopTLS(b *testing.B) {
	p := newPKI(b)
	u, _ := url.Parse(tlsTargetProcess(b, p))
	c := config(u, 1, 16, time.Hour, 0)
	c.TLS = tlsOptions(b, bench.TLSOptions{CAFile: filepath.Join(p.dir, "ca.pem")})
	c.Requests = int64(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	run(b, c)
}
