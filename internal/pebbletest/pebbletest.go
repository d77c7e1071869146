// Package pebbletest starts Let's Encrypt's test ACME server, pebble
// (github.com/letsencrypt/pebble/v2), with its DNS server
// pebble-challtestsrv answering every name with 127.0.0.1, for a test,
// and stops them when the test ends. scripts/install-deps.sh installs
// both into .cache/bin; scripts/test-isolated.sh exports their paths.
package pebbletest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/internal/testcert"
	"github.com/linkgate/linkgate/internal/testdep"
)

// Environment variables set by scripts/test-isolated.sh.
const (
	PebbleEnv       = "LINKGATE_TEST_PEBBLE"       // path of pebble
	ChallTestSrvEnv = "LINKGATE_TEST_CHALLTESTSRV" // path of pebble-challtestsrv
)

// Options describe the CA.
type Options struct {
	// HTTPPort and TLSPort are where pebble's validation authority
	// connects for HTTP-01 and TLS-ALPN-01 (on 127.0.0.1, every name's
	// address): the listeners of the server under test.
	HTTPPort, TLSPort int
	// AlwaysValid skips validation (PEBBLE_VA_ALWAYS_VALID): for tests
	// where the challenge is not the point.
	AlwaysValid bool
	// Validity is the issued certificates' lifetime (default 90 days).
	Validity time.Duration
	// Port is the ACME directory's port (default: a free one); a test of
	// a CA down at start picks it, starts the server, then the CA.
	Port int
	// Blocklist are names pebble refuses to issue for (rejectedIdentifier).
	Blocklist []string
	// OCSP names an OCSP responder in the certificates and runs it: it
	// answers from pebble's revocation state, signed by pebble's
	// intermediate, valid for OCSPValidity (pebble runs none itself).
	OCSP bool
}

// CA is a running pebble.
type CA struct {
	// URL is the ACME directory; RootFile the PEM of the CA that signed
	// pebble's own HTTPS certificate (what a client must trust to talk to
	// it: --acme-ca-root).
	URL, RootFile string
	mgmt          string
	log           *syncbuf.Buffer
	client        *http.Client

	pebble, chall, dns, cfgFile string
	env                         []string
	stops                       []func()
}

// FreePort returns a port nothing listens on at the moment.
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start starts pebble-challtestsrv and pebble. Without them the test is
// skipped, or failed in CI.
func Start(tb testing.TB, o Options) *CA {
	tb.Helper()
	c := New(tb, o)
	c.Start(tb)
	return c
}

// New prepares a CA (its URL and RootFile are set) without starting it:
// Start starts it.
func New(tb testing.TB, o Options) *CA {
	tb.Helper()
	c := &CA{
		pebble: testdep.Binary(tb, PebbleEnv, "pebble"),
		chall:  testdep.Binary(tb, ChallTestSrvEnv, "pebble-challtestsrv"),
		dns:    "127.0.0.1:" + strconv.Itoa(FreePort(tb)),
		log:    new(syncbuf.Buffer),
	}
	dir := tb.TempDir()
	ca := testcert.NewCA(tb, "pebble test listener CA")
	caFile, certFile, keyFile := testcert.WriteFiles(tb, dir, ca, ca.Issue(tb, testcert.Options{DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}))
	if o.Port == 0 {
		o.Port = FreePort(tb)
	}
	if o.Validity == 0 {
		o.Validity = 90 * 24 * time.Hour
	}
	mgmt := "127.0.0.1:" + strconv.Itoa(FreePort(tb))
	ocspURL, keyAlg := "", "ecdsa"
	if o.OCSP {
		keyAlg = "rsa" // pebble's management API hands out its intermediate's key only when RSA
		r := startOCSP(c)
		tb.Cleanup(r.srv.Close)
		ocspURL = r.srv.URL
	}
	blocklist := o.Blocklist
	if blocklist == nil {
		blocklist = []string{}
	}
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":           "127.0.0.1:" + strconv.Itoa(o.Port),
		"managementListenAddress": mgmt,
		"certificate":             certFile,
		"privateKey":              keyFile,
		"httpPort":                o.HTTPPort,
		"tlsPort":                 o.TLSPort,
		"ocspResponderURL":        ocspURL,
		"domainBlocklist":         blocklist,
		"retryAfter":              map[string]int{"authz": 1, "order": 1},
		"keyAlgorithm":            keyAlg,
		"profiles": map[string]any{"default": map[string]any{
			"description": "linkgate tests", "validityPeriod": int(o.Validity / time.Second),
		}},
	}}
	b, _ := json.Marshal(cfg)
	c.cfgFile = filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(c.cfgFile, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	c.env = []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"}
	if o.AlwaysValid {
		c.env = append(c.env, "PEBBLE_VA_ALWAYS_VALID=1")
	}
	c.URL = fmt.Sprintf("https://127.0.0.1:%d/dir", o.Port)
	c.RootFile = caFile
	c.mgmt = "https://" + mgmt
	c.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	return c
}

// Start starts the CA's DNS server and pebble, and waits until pebble
// listens.
func (c *CA) Start(tb testing.TB) {
	tb.Helper()
	challLog := c.start(tb, c.chall, nil, nil, "-dnsserver", c.dns, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", "", "-management", "127.0.0.1:"+strconv.Itoa(FreePort(tb)))
	eventually.True(tb, 10*time.Second, "pebble-challtestsrv's DNS server on "+c.dns, func() bool {
		return strings.Contains(challLog.String(), "Starting challenge servers")
	})
	c.start(tb, c.pebble, c.env, c.log, "-config", c.cfgFile, "-dnsserver", c.dns, "-strict")
	eventually.True(tb, 20*time.Second, "pebble listening on "+c.URL+" and "+c.mgmt, func() bool {
		for _, u := range []string{c.URL, c.mgmt} {
			conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(u, "https://"), "/dir"))
			if err != nil {
				return false
			}
			conn.Close()
		}
		return true
	})
}

// start runs bin until the test ends and returns its combined output
// (into out, when not nil).
func (c *CA) start(tb testing.TB, bin string, env []string, out *syncbuf.Buffer, args ...string) *syncbuf.Buffer {
	tb.Helper()
	if out == nil {
		out = new(syncbuf.Buffer)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("%s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	c.stops = append(c.stops, stop)
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			tb.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
	return out
}

// Stop stops the CA (a test of a CA gone down); what it issued is
// forgotten, as pebble keeps nothing on disk.
func (c *CA) Stop() {
	for _, stop := range c.stops {
		stop()
	}
	c.stops = nil
}

// Port is the ACME directory's port.
func (c *CA) Port() int {
	u := strings.TrimSuffix(strings.TrimPrefix(c.URL, "https://127.0.0.1:"), "/dir")
	p, _ := strconv.Atoi(u)
	return p
}

// Orders is the number of orders the CA has been sent.
func (c *CA) Orders() int { return strings.Count(c.log.String(), "Added order") }

// Log is pebble's output so far.
func (c *CA) Log() string { return c.log.String() }

// Roots is a pool of the root that signs the certificates pebble issues
// (fetched from its management interface, /roots/0).
func (c *CA) Roots(tb testing.TB) *x509.CertPool {
	tb.Helper()
	resp, err := c.client.Get(c.mgmt + "/roots/0")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("pebble /roots/0: %d %v", resp.StatusCode, err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		tb.Fatalf("pebble /roots/0: no PEM in %q", b)
	}
	return p
}
