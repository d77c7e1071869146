package certmagic_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/certmagic"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/pebbletest"
	"github.com/linkgate/linkgate/internal/syncbuf"
)

// listeners are a test server's cleartext (HTTP-01) and TLS listeners.
type listeners struct {
	http, tls net.Listener
}

func listen(t *testing.T) listeners {
	t.Helper()
	var l listeners
	for _, p := range []*net.Listener{&l.http, &l.tls} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		*p = ln
	}
	return l
}

func port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// serve answers HTTP-01 challenges on l.http and "ok" over TLS on l.tls
// with m's certificates.
func serve(t *testing.T, l listeners, m interface{ TLSConfig() *tls.Config }, challenge func(http.ResponseWriter, *http.Request) bool) {
	t.Helper()
	h := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if challenge == nil || !challenge(w, r) {
			http.Redirect(w, r, "https://"+r.Host+r.URL.RequestURI(), http.StatusPermanentRedirect)
		}
	})}
	s := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})}
	go h.Serve(l.http)
	go s.Serve(tls.NewListener(l.tls, m.TLSConfig()))
	t.Cleanup(func() { h.Close(); s.Close() })
}

// handshake dials the TLS listener with SNI name and returns the leaf the
// server sent, verified against roots.
func handshake(l listeners, name string, roots *x509.CertPool) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", l.tls.Addr().String(),
		&tls.Config{ServerName: name, RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

func newManager(t *testing.T, ca *pebbletest.CA, l listeners, cfg certmagic.Config) (*certmagic.Manager, *syncbuf.Buffer) {
	t.Helper()
	logs := new(syncbuf.Buffer)
	cfg.CA, cfg.CARoot = ca.URL, ca.RootFile
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.ListenHost, cfg.HTTPPort, cfg.TLSPort = "127.0.0.1", port(l.http), port(l.tls)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := certmagic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	return m, logs
}

// TestObtain gets a certificate from pebble by each challenge type, which
// pebble really validates against the test's listeners, and serves it.
func TestObtain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		challenge string
		cfg       certmagic.Config
	}{
		{"http-01", "http-01", certmagic.Config{DisableTLSALPN01: true}},
		{"tls-alpn-01", "tls-alpn-01", certmagic.Config{DisableHTTP01: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := listen(t)
			ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port(l.http), TLSPort: port(l.tls)})
			tc.cfg.Domains = []string{"sho.test"}
			m, logs := newManager(t, ca, l, tc.cfg)
			serve(t, l, m, m.HTTPChallenge)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := m.ObtainSync(ctx, "sho.test"); err != nil {
				t.Fatal(err)
			}
			leaf, err := handshake(l, "sho.test", ca.Roots(t))
			if err != nil {
				t.Fatal(err)
			}
			if leaf.Subject.CommonName != "sho.test" && (len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "sho.test") {
				t.Errorf("served %v, want sho.test", leaf.DNSNames)
			}
			if n := ca.Orders(); n != 1 {
				t.Errorf("%d orders at the CA, want 1", n)
			}
			if !strings.Contains(logs.String(), `msg="challenge accepted" component=certmagic logger=.acme_client challenge_type=`+tc.challenge) {
				t.Errorf("no %s challenge accepted in the logs", tc.challenge)
			}
			if !strings.Contains(ca.Log(), "set VALID by completed challenge") {
				t.Error("pebble validated no challenge")
			}
		})
	}
}

// TestOnDemand: a name the allow-check refuses gets no certificate and
// places no order; an allowed one gets its certificate at its first
// handshake; beyond the rate limit an allowed name is refused too, and
// the refusal is logged with the domain.
func TestOnDemand(t *testing.T) {
	l := listen(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port(l.http), TLSPort: port(l.tls), AlwaysValid: true})
	var asked atomic.Int64
	allowed := map[string]bool{"a.test": true, "b.test": true}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	m, logs := newManager(t, ca, l, certmagic.Config{
		Allow: func(_ context.Context, name string) error {
			asked.Add(1)
			if !allowed[name] {
				return errors.New("not a configured domain")
			}
			return nil
		},
		OrderBurst: 1, OrderRate: time.Hour,
		Now: func() time.Time { return now },
	})
	serve(t, l, m, m.HTTPChallenge)
	roots := ca.Roots(t)

	for _, tc := range []struct {
		sni    string
		ok     bool
		orders int
	}{
		{"evil.test", false, 0},       // refused by the allow-check: no order
		{"a.test", true, 1},           // allowed: ordered at its first handshake
		{"a.test", true, 1},           // served from the cache
		{"b.test", false, 1},          // allowed, but beyond the rate limit
		{"other.evil.test", false, 1}, // still no order
	} {
		leaf, err := handshake(l, tc.sni, roots)
		if tc.ok != (err == nil) {
			t.Fatalf("%s: handshake error %v, want ok=%v", tc.sni, err, tc.ok)
		}
		if tc.ok && leaf.DNSNames[0] != tc.sni {
			t.Errorf("%s: served %v", tc.sni, leaf.DNSNames)
		}
		if n := ca.Orders(); n != tc.orders {
			t.Errorf("after %s: %d orders at the CA, want %d", tc.sni, n, tc.orders)
		}
	}
	if asked.Load() == 0 {
		t.Error("the allow-check was never asked")
	}
	if s := logs.String(); !strings.Contains(s, "domain=b.test") || !strings.Contains(s, "rate-limited") {
		t.Errorf("no log line names b.test as rate-limited:\n%s", s)
	}
	// An hour later the limit has refilled.
	now = now.Add(time.Hour)
	if _, err := handshake(l, "b.test", roots); err != nil {
		t.Fatalf("b.test an hour later: %v", err)
	}
}

// TestRefusedOrder: the CA refuses a name; the error and the log line
// name the domain and the CA's reason.
func TestRefusedOrder(t *testing.T) {
	l := listen(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port(l.http), TLSPort: port(l.tls), AlwaysValid: true,
		Blocklist: []string{"refused.test"}})
	m, logs := newManager(t, ca, l, certmagic.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := m.ObtainSync(ctx, "refused.test")
	if err == nil {
		t.Fatal("the CA issued for a blocked name")
	}
	if !strings.Contains(err.Error(), "refused.test") || !strings.Contains(err.Error(), "rejectedIdentifier") {
		t.Errorf("error %q names neither the domain nor the CA's reason", err)
	}
	line := ""
	for _, s := range strings.Split(logs.String(), "\n") {
		if strings.Contains(s, "certificate order failed") {
			line = s
		}
	}
	if !strings.Contains(line, "domain=refused.test") || !strings.Contains(line, "rejectedIdentifier") {
		t.Errorf("log line %q names neither the domain nor the reason", line)
	}
}

// TestCADownAtStart: with the CA unreachable, Manage returns at once,
// the order fails in the background and is retried (certmagic's backoff:
// 1 min, 2 min, …), logged with the domain; once the CA is up, a name
// allowed on demand gets its certificate at its first handshake.
func TestCADownAtStart(t *testing.T) {
	l := listen(t)
	ca := pebbletest.New(t, pebbletest.Options{HTTPPort: port(l.http), TLSPort: port(l.tls), AlwaysValid: true})
	m, logs := newManager(t, ca, l, certmagic.Config{
		Domains: []string{"sho.test"},
		Allow: func(_ context.Context, name string) error {
			if name != "later.test" {
				return errors.New("not a configured domain")
			}
			return nil
		},
	})
	serve(t, l, m, m.HTTPChallenge)
	if err := m.Manage(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 30*time.Second, "the failed order logged, and its retry", func() bool {
		s := logs.String()
		return strings.Contains(s, `msg="certificate order failed" domain=sho.test`) && strings.Contains(s, "retrying_in=1m0s")
	})
	ca.Start(t)
	leaf, err := handshake(l, "later.test", ca.Roots(t))
	if err != nil {
		t.Fatalf("once the CA is up: %v", err)
	}
	if leaf.DNSNames[0] != "later.test" {
		t.Errorf("served %v", leaf.DNSNames)
	}
}

// TestCachedWhileCADown: a certificate in storage is served by a new
// instance while its CA is down.
func TestCachedWhileCADown(t *testing.T) {
	l := listen(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port(l.http), TLSPort: port(l.tls), AlwaysValid: true})
	dir := t.TempDir()
	first, _ := newManager(t, ca, l, certmagic.Config{Dir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := first.ObtainSync(ctx, "cached.test"); err != nil {
		t.Fatal(err)
	}
	first.Close()
	roots := ca.Roots(t)
	ca.Stop()

	m, _ := newManager(t, ca, l, certmagic.Config{Dir: dir, Domains: []string{"cached.test"}})
	serve(t, l, m, m.HTTPChallenge)
	if err := m.Manage(context.Background()); err != nil {
		t.Fatal(err)
	}
	var leaf *x509.Certificate
	eventually.True(t, 10*time.Second, "the stored certificate served", func() bool {
		var err error
		leaf, err = handshake(l, "cached.test", roots)
		return err == nil
	})
	if leaf.DNSNames[0] != "cached.test" {
		t.Errorf("served %v", leaf.DNSNames)
	}
}

// TestRenewal: a short-lived certificate (pebble issuing for 10 s) is
// renewed in the background and the new one served.
func TestRenewal(t *testing.T) {
	l := listen(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port(l.http), TLSPort: port(l.tls), AlwaysValid: true, Validity: 10 * time.Second})
	renewed := make(chan struct{}, 1)
	m, _ := newManager(t, ca, l, certmagic.Config{
		Domains:            []string{"short.test"},
		RenewalWindowRatio: 0.7,
		RenewCheckInterval: 500 * time.Millisecond,
		OnEvent: func(_ context.Context, event string, data map[string]any) {
			if r, _ := data["renewal"].(bool); event == "cert_obtained" && r {
				select {
				case renewed <- struct{}{}:
				default:
				}
			}
		},
	})
	serve(t, l, m, m.HTTPChallenge)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.ObtainSync(ctx, "short.test"); err != nil {
		t.Fatal(err)
	}
	roots := ca.Roots(t)
	first, err := handshake(l, "short.test", roots)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-renewed:
	case <-time.After(30 * time.Second):
		t.Fatal("not renewed within 30 s")
	}
	var next *x509.Certificate
	eventually.True(t, 10*time.Second, "the renewed certificate served", func() bool {
		next, err = handshake(l, "short.test", roots)
		return err == nil && next.SerialNumber.Cmp(first.SerialNumber) != 0
	})
	if n := ca.Orders(); n < 2 {
		t.Errorf("%d orders, want the first and a renewal", n)
	}
}
