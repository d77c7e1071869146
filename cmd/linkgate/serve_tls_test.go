//go:build !functiononly

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/h2spec"
	"github.com/linkgate/linkgate/internal/pebbletest"
	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/internal/testcert"
	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// httpsClients are HTTP/1.1 and HTTP/2 clients of serve's HTTPS listener
// at addr, for the name sni, trusting roots.
func httpsClients(addr, sni string, roots *x509.CertPool) (h1, h2 *http.Client) {
	tc := &tls.Config{ServerName: sni, RootCAs: roots}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h1 = &http.Client{Timeout: 20 * time.Second, CheckRedirect: noFollow, Transport: &http.Transport{
		DialContext: dial, TLSClientConfig: tc, ForceAttemptHTTP2: false,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	var only2 http.Protocols
	only2.SetHTTP2(true)
	h2 = &http.Client{Timeout: 20 * time.Second, CheckRedirect: noFollow, Transport: &http.Transport{
		DialContext: dial, TLSClientConfig: tc, ForceAttemptHTTP2: true, Protocols: &only2}}
	return h1, h2
}

func get(t *testing.T, c *http.Client, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestServeTLSAuto: serve --tls auto gets its domain's certificate from a
// real ACME CA (pebble, validating the challenge against serve's own
// listeners), serves HTTP/1.1 and HTTP/2 over it with HSTS, redirects
// cleartext requests with 308, answers /healthz in cleartext, and places
// no order for an SNI it is not configured for.
func TestServeTLSAuto(t *testing.T) {
	httpsPort, httpPort := pebbletest.FreePort(t), pebbletest.FreePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: httpsPort})
	httpsAddr := "127.0.0.1:" + strconv.Itoa(httpsPort)
	s := startServe(t, nil, "--tls", "auto", "--domain", "sho.test", "--acme-ca", ca.URL, "--acme-ca-root", ca.RootFile,
		"--https-addr", httpsAddr, "--http-addr", "127.0.0.1:"+strconv.Itoa(httpPort), "--hsts", "8760h")
	roots := ca.Roots(t)
	eventually.True(t, 60*time.Second, "sho.test's certificate served", func() bool {
		c, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "sho.test", RootCAs: roots})
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if n := ca.Orders(); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
	h1, h2 := httpsClients(httpsAddr, "sho.test", roots)
	base := "https://sho.test:" + strconv.Itoa(httpsPort)
	resp, body := get(t, h1, "POST", base+"/shortenURL", `{"OriginalURL":"https://example.com/over-tls"}`)
	var created struct{ ShortURL string }
	if err := json.Unmarshal([]byte(body), &created); resp.StatusCode != 201 || err != nil || created.ShortURL == "" {
		t.Fatalf("POST /shortenURL over HTTPS: %d %s", resp.StatusCode, body)
	}
	id := created.ShortURL
	for _, tc := range []struct {
		name  string
		c     *http.Client
		proto string
	}{{"HTTP/1.1", h1, "HTTP/1.1"}, {"HTTP/2", h2, "HTTP/2.0"}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := get(t, tc.c, "GET", base+"/"+id, "")
			if resp.StatusCode/100 != 3 || resp.Header.Get("Location") != "https://example.com/over-tls" {
				t.Errorf("GET /%s: %d Location %q", id, resp.StatusCode, resp.Header.Get("Location"))
			}
			if resp.Proto != tc.proto {
				t.Errorf("protocol %s, want %s", resp.Proto, tc.proto)
			}
			if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
				t.Errorf("Strict-Transport-Security %q", got)
			}
		})
	}
	// Cleartext: 308 to https for everything but ACME and the probes.
	req, _ := http.NewRequest("GET", s.URL+"/"+id+"?utm=1", nil)
	req.Host = "sho.test"
	r2, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if want := base + "/" + id + "?utm=1"; r2.StatusCode != http.StatusPermanentRedirect || r2.Header.Get("Location") != want {
		t.Errorf("cleartext GET: %d Location %q, want 308 %q", r2.StatusCode, r2.Header.Get("Location"), want)
	}
	if r2.Header.Get("Strict-Transport-Security") != "" {
		t.Error("HSTS over cleartext")
	}
	// Not a configured domain: no certificate, no order.
	if _, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "evil.test", RootCAs: roots}); err == nil {
		t.Error("a certificate for evil.test")
	}
	if n := ca.Orders(); n != 1 {
		t.Errorf("after evil.test: %d orders, want 1", n)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// TestServeTLSFiles: --tls CERT,KEY serves the files' certificate; a pair
// that cannot be served stops serve at start with the file and reason.
func TestServeTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "serve files CA")
	_, cert, key := testcert.WriteFiles(t, dir, ca, ca.Issue(t, testcert.Options{DNS: []string{"sho.test"}}))
	other := ca.Issue(t, testcert.Options{DNS: []string{"other.test"}})
	otherKey := filepath.Join(dir, "other-key.pem")
	os.WriteFile(otherKey, []byte(other.KeyPEM), 0o600)
	notPEM := filepath.Join(dir, "junk.pem")
	os.WriteFile(notPEM, []byte("junk"), 0o600)

	for _, tc := range []struct {
		name, files, want string
	}{
		{"mismatched key", cert + "," + otherKey, "other-key.pem does not match the certificate " + cert},
		{"bad certificate", notPEM + "," + key, notPEM + ": no PEM CERTIFICATE"},
		{"missing", filepath.Join(dir, "nope.pem") + "," + key, "nope.pem"},
		{"one file", cert, "want off, auto or CERT.pem,KEY.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errOut syncbuf.Buffer
			args := []string{"serve", "--store", "pebble:" + filepath.Join(t.TempDir(), "links"), "--tls", tc.files,
				"--https-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}
			err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &errOut)
			if err == nil || !strings.Contains(err.Error()+errOut.String(), tc.want) {
				t.Errorf("exit %d (%v), want an error saying %q", cli.ExitCode(err), err, tc.want)
			}
		})
	}

	httpsAddr := "127.0.0.1:" + strconv.Itoa(pebbletest.FreePort(t))
	startServe(t, nil, "--tls", cert+","+key, "--https-addr", httpsAddr, "--http-addr", "127.0.0.1:0")
	h1, h2 := httpsClients(httpsAddr, "sho.test", ca.Pool())
	for _, c := range []*http.Client{h1, h2} {
		resp, body := get(t, c, "GET", "https://sho.test/healthz", "")
		if resp.StatusCode != 200 {
			t.Errorf("%s /healthz: %d %s", resp.Proto, resp.StatusCode, body)
		}
		if got := resp.Header.Get("Strict-Transport-Security"); got != "" {
			t.Errorf("HSTS without --hsts: %q", got)
		}
	}
}

// TestServeTLSAutoDynamoDB: two serve instances with --tls auto on one
// DynamoDB table (its certificate table, DynamoDB Local) and a real
// pebble validating on the first instance's listeners: the domain is
// ordered once at the CA, under the lock in the table, and both instances
// serve that certificate; a domain added through one instance's API gets
// its certificate at its first handshake on the other.
func TestServeTLSAutoDynamoDB(t *testing.T) {
	localAWSEnv(t)
	table := createTable(t)
	httpsPort, httpPort := pebbletest.FreePort(t), pebbletest.FreePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: httpsPort})
	common := []string{"--store", "dynamodb:" + table, "--store-timeout", "10s", "--tls", "auto", "--domain", "sho.test",
		"--acme-ca", ca.URL, "--acme-ca-root", ca.RootFile, "--admin-key", "adm"}
	addrs := []string{"127.0.0.1:" + strconv.Itoa(httpsPort), "127.0.0.1:" + strconv.Itoa(pebbletest.FreePort(t))}
	// Both order sho.test at start, the second while the first's order
	// is under way or done.
	for i, httpAddr := range []string{"127.0.0.1:" + strconv.Itoa(httpPort), "127.0.0.1:0"} {
		startServe(t, nil, append(common, "--https-addr", addrs[i], "--http-addr", httpAddr)...)
	}
	roots := ca.Roots(t)
	serials := make([]string, len(addrs))
	for i, addr := range addrs {
		eventually.True(t, 60*time.Second, "sho.test's certificate served by instance "+strconv.Itoa(i), func() bool {
			c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "sho.test", RootCAs: roots})
			if err != nil {
				return false
			}
			defer c.Close()
			serials[i] = c.ConnectionState().PeerCertificates[0].SerialNumber.String()
			return true
		})
	}
	if serials[0] != serials[1] {
		t.Errorf("the instances serve certificates %s and %s, want the same", serials[0], serials[1])
	}
	if n := ca.Orders(); n != 1 {
		t.Errorf("%d orders at the CA, want 1\n%s", n, ca.Log())
	}
	// A domain added through the first instance: the second, which has
	// not read the registry since (--domain-refresh 10 s), reads it at
	// the first handshake of that name and orders its certificate. It
	// reads the registry for an unknown name at most once per
	// httpapi.MinMissRefresh: its last read (at its start, which may be
	// under a second ago) must be that old when the handshake comes —
	// a handshake sooner is refused by design (a CI run on a loaded
	// machine got there within the second and failed).
	h1, _ := httpsClients(addrs[0], "sho.test", roots)
	if status, body := adminRequest(t, h1, "POST", "https://sho.test/api/v1/domains", "adm", `{"domain":"go.test"}`); status != http.StatusCreated {
		t.Fatalf("POST /api/v1/domains on the first instance: %d %s", status, body)
	}
	time.Sleep(httpapi.MinMissRefresh)
	if !handshakes(addrs[1], "go.test", roots) {
		t.Errorf("the second instance: no certificate for go.test at its first handshake\n%s", ca.Log())
	}
	if n := ca.Orders(); n != 2 {
		t.Errorf("%d orders at the CA, want 2\n%s", n, ca.Log())
	}
}

// startServeTLSFiles runs serve with --tls over a certificate for
// localhost and 127.0.0.1 from a test CA, and returns the HTTPS address
// and the CA's file.
func startServeTLSFiles(t *testing.T, args ...string) (addr, caFile string) {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "serve TLS CA")
	caFile, cert, key := testcert.WriteFiles(t, dir, ca, ca.Issue(t, testcert.Options{
		DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotAfter: time.Now().Add(90 * 24 * time.Hour),
		// As a public CA's certificate names a revocation service
		// (testssl rates one naming none HIGH, whoever serves it).
		OCSPServer: "http://127.0.0.1:9/ocsp"}))
	addr = "127.0.0.1:" + strconv.Itoa(pebbletest.FreePort(t))
	startServe(t, nil, append([]string{"--tls", cert + "," + key, "--https-addr", addr, "--http-addr", "127.0.0.1:0"}, args...)...)
	return addr, caFile
}

// TestServeH2Spec: serve's HTTP/2 over TLS passes every h2spec case.
func TestServeH2Spec(t *testing.T) {
	h2spec.Binary(t)
	addr, _ := startServeTLSFiles(t)
	h2spec.Run(t, addr, true)
}

// TestServeTestSSL: testssl.sh (Debian's) finds nothing rated HIGH or
// CRITICAL in serve's TLS: protocols, ciphers, server defaults, headers
// and the vulnerabilities it checks (a whole run, --fast: about 100 s on
// a loaded 2-core machine, most of it testssl's own openssl processes).
func TestServeTestSSL(t *testing.T) {
	testdep.Binary(t, "LINKGATE_TEST_TESTSSL", "testssl")
	addr, caFile := startServeTLSFiles(t, "--hsts", "8760h")
	testSSL(t, "serve", "https://"+addr+"/healthz", caFile)
}

// adminRequest sends an admin API request (Bearer key) through c and
// returns its status and body.
func adminRequest(t *testing.T, c *http.Client, method, url, key, body string) (int, string) {
	t.Helper()
	return request(t, c, method, url, body, "Authorization", "Bearer "+key, "Content-Type", "application/json")
}

// handshakes reports whether a TLS handshake with SNI name succeeds at
// addr, trusting roots.
func handshakes(addr, name string, roots *x509.CertPool) bool {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
	if err == nil {
		c.Close()
	}
	return err == nil
}

// TestServeTLSAutoRegistry: a domain added through the API while serve
// --tls auto runs gets its certificate from the CA (pebble) at its first
// handshake; an SNI that is no domain, and a domain added then deleted,
// place no order.
func TestServeTLSAutoRegistry(t *testing.T) {
	httpsPort, httpPort := pebbletest.FreePort(t), pebbletest.FreePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: httpsPort})
	httpsAddr := "127.0.0.1:" + strconv.Itoa(httpsPort)
	startServe(t, nil, "--tls", "auto", "--domain", "sho.test", "--admin-key", "adm", "--acme-ca", ca.URL, "--acme-ca-root", ca.RootFile,
		"--https-addr", httpsAddr, "--http-addr", "127.0.0.1:"+strconv.Itoa(httpPort))
	roots := ca.Roots(t)
	eventually.True(t, 60*time.Second, "sho.test's certificate served", func() bool { return handshakes(httpsAddr, "sho.test", roots) })
	h1, _ := httpsClients(httpsAddr, "sho.test", roots)
	api := "https://sho.test:" + strconv.Itoa(httpsPort) + "/api/v1/domains"

	if handshakes(httpsAddr, "go.test", roots) {
		t.Fatal("a certificate for go.test before it is added")
	}
	if status, body := adminRequest(t, h1, "POST", api, "adm", `{"domain":"go.test"}`); status != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", api, status, body)
	}
	// On demand: its first handshake waits for the order.
	if !handshakes(httpsAddr, "go.test", roots) {
		t.Errorf("no certificate for go.test at its first handshake after it was added\n%s", ca.Log())
	}
	h1go, _ := httpsClients(httpsAddr, "go.test", roots)
	if status, body := adminRequest(t, h1go, "POST", "https://go.test:"+strconv.Itoa(httpsPort)+"/api/v1/links", "adm", `{"url":"https://example.com/registry","slug":"reg"}`); status != http.StatusCreated ||
		!strings.Contains(body, `"short_url":"https://go.test/reg"`) {
		t.Errorf("create on go.test over its certificate: %d %s", status, body)
	}
	// Added and deleted before any handshake: no certificate, no order.
	if status, body := adminRequest(t, h1, "POST", api, "adm", `{"domain":"gone.test"}`); status != http.StatusCreated {
		t.Fatalf("POST gone.test: %d %s", status, body)
	}
	if status, body := adminRequest(t, h1, "DELETE", api+"/gone.test", "adm", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE gone.test: %d %s", status, body)
	}
	for _, name := range []string{"gone.test", "evil.test"} {
		if handshakes(httpsAddr, name, roots) {
			t.Errorf("a certificate for %s", name)
		}
	}
	if n := ca.Orders(); n != 2 {
		t.Errorf("%d orders at the CA, want 2 (sho.test, go.test)\n%s", n, ca.Log())
	}
}
