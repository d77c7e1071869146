package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testcert"
	"github.com/linkgate/linkgate/internal/testdep"
)

func sslBody(t *testing.T, p testcert.Pair, snis ...string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"cert": p.CertPEM, "key": p.KeyPEM, "snis": snis})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGatewayTLS runs the real command: an ssl resource put through the
// admin API serves HTTPS (HTTP/1.1 and HTTP/2) on --listen-tls for its
// SNIs; a changed certificate reaches new handshakes within 1 s while an
// open connection keeps working; http_to_https redirects to the TLS port;
// a deleted resource fails the handshake.
func TestGatewayTLS(t *testing.T) {
	g := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw.db"))
	ca := testcert.NewCA(t, "e2e CA")
	first := ca.Issue(t, testcert.Options{DNS: []string{"api.test.com"}})
	if code, body := do(t, "PUT", g.url+"/apisix/admin/ssl/1", sslBody(t, first, "api.test.com", "*.test.com"), "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT ssl: %d %s", code, body)
	}
	up := helloUpstream(t)
	route := `{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"` + up + `":1}}}`
	if code, body := do(t, "PUT", g.url+"/apisix/admin/routes/1", route, "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT route: %d %s", code, body)
	}
	redirect := `{"uri":"/secure","plugins":{"redirect":{"http_to_https":true}}}`
	if code, body := do(t, "PUT", g.url+"/apisix/admin/routes/2", redirect, "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT route: %d %s", code, body)
	}
	clients := map[string]*http.Client{}
	var keep *http.Client
	for _, h2 := range []bool{false, true} {
		var p http.Protocols
		p.SetHTTP1(!h2)
		p.SetHTTP2(h2)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Protocols: &p,
			TLSClientConfig: &tls.Config{ServerName: "api.test.com", RootCAs: ca.Pool()}}}
		clients[map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2]] = c
		keep = c
	}
	serial := func(c *http.Client) *big.Int {
		t.Helper()
		resp, err := c.Get("https://" + g.tlsAddr + "/hello")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "1234567890" {
			t.Fatalf("%s: %d %q", resp.Proto, resp.StatusCode, b)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber
	}
	for name, c := range clients {
		eventually.True(t, 2*time.Second, name+" serves the ssl resource", func() bool {
			resp, err := c.Get("https://" + g.tlsAddr + "/hello")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		if s := serial(c); s.Cmp(first.Leaf.SerialNumber) != 0 {
			t.Errorf("%s: certificate %v, want the resource's", name, s)
		}
	}

	// A new certificate: new handshakes get it within a second, the open
	// HTTP/2 connection of keep goes on.
	second := ca.Issue(t, testcert.Options{DNS: []string{"api.test.com"}})
	start := time.Now()
	if code, body := do(t, "PUT", g.url+"/apisix/admin/ssl/1", sslBody(t, second, "api.test.com"), "X-API-KEY", seedKey); code != 200 {
		t.Fatalf("PUT ssl again: %d %s", code, body)
	}
	eventually.True(t, time.Second-time.Since(start), "a new handshake gets the new certificate", func() bool {
		conn, err := tls.Dial("tcp", g.tlsAddr, &tls.Config{ServerName: "api.test.com", RootCAs: ca.Pool()})
		if err != nil {
			return false
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(second.Leaf.SerialNumber) == 0
	})
	if s := serial(keep); s.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Errorf("the open connection changed certificate: %v", s)
	}

	// http_to_https sends cleartext clients to the TLS listener's port.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(g.url + "/secure?x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, port, _ := net.SplitHostPort(g.tlsAddr)
	host, _, _ := net.SplitHostPort(strings.TrimPrefix(g.url, "http://"))
	if want := "https://" + host + ":" + port + "/secure?x=1"; resp.StatusCode != 301 || resp.Header.Get("Location") != want {
		t.Errorf("redirect: %d %q, want 301 %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}

	if code, body := do(t, "DELETE", g.url+"/apisix/admin/ssl/1", "", "X-API-KEY", seedKey); code != 200 {
		t.Fatalf("DELETE ssl: %d %s", code, body)
	}
	eventually.True(t, time.Second, "handshakes fail without the resource", func() bool {
		conn, err := tls.Dial("tcp", g.tlsAddr, &tls.Config{ServerName: "api.test.com", RootCAs: ca.Pool()})
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
}

// TestGatewayTestSSL: testssl.sh (Debian's) finds nothing rated HIGH or
// CRITICAL in the gateway's TLS (--listen-tls, a certificate uploaded as
// an ssl resource for SNI localhost, a route proxying /hello): protocols,
// ciphers, server defaults, headers and the vulnerabilities it checks.
func TestGatewayTestSSL(t *testing.T) {
	testdep.Binary(t, "LINKGATE_TEST_TESTSSL", "testssl")
	g := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw.db"))
	ca := testcert.NewCA(t, "gateway testssl CA")
	// As a public CA's certificate names a revocation service (testssl
	// rates one naming none HIGH, whoever serves it).
	pair := ca.Issue(t, testcert.Options{DNS: []string{"localhost"}, NotAfter: time.Now().Add(90 * 24 * time.Hour),
		OCSPServer: "http://127.0.0.1:9/ocsp"})
	if code, body := do(t, "PUT", g.url+"/apisix/admin/ssl/1", sslBody(t, pair, "localhost"), "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT ssl: %d %s", code, body)
	}
	route := `{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"` + helloUpstream(t) + `":1}}}`
	if code, body := do(t, "PUT", g.url+"/apisix/admin/routes/1", route, "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT route: %d %s", code, body)
	}
	_, port, err := net.SplitHostPort(g.tlsAddr)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://localhost:" + port + "/hello"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, g.tlsAddr)
		}}}
	eventually.True(t, 2*time.Second, "the route and certificate served", func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200 && string(b) == "1234567890"
	})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, []byte(ca.PEM), 0o600); err != nil {
		t.Fatal(err)
	}
	testSSL(t, "gateway", url, caFile)
}
