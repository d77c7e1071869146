package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/certs"
	"github.com/linkgate/linkgate/internal/testcert"
)

func entry(t testing.TB, ca *testcert.CA, id string, snis []string, opts ...testcert.Options) *gateway.SSLEntry {
	t.Helper()
	if len(opts) == 0 {
		opts = []testcert.Options{{DNS: snis}}
	}
	e := &gateway.SSLEntry{ID: id, SNIs: snis}
	for _, o := range opts {
		e.Certs = append(e.Certs, ca.Issue(t, o).TLS)
	}
	return e
}

func TestMatch(t *testing.T) {
	ca := testcert.NewCA(t, "certs test CA")
	m := certs.NewManager(nil)
	m.Load([]*gateway.SSLEntry{
		entry(t, ca, "2", []string{"www.test.com", "*.test.com"}),
		entry(t, ca, "1", []string{"www.test.com"}), // lower id wins the shared name
		entry(t, ca, "3", []string{"*.b.test.com", "test.com"}),
		{ID: "4", SNIs: []string{"empty.com"}}, // no pair: not served
	})
	ix := m.Index()
	if ix.Len() != 3 {
		t.Errorf("%d resources indexed, want 3", ix.Len())
	}
	for sni, want := range map[string]string{
		"www.test.com":    "1",
		"WWW.Test.COM.":   "1",
		"a.test.com":      "2",
		"test.com":        "3",
		"x.b.test.com":    "3",
		"b.test.com":      "2", // one label under *.test.com
		"x.y.b.test.com":  "",  // a wildcard covers one label only
		"a.a.test.com":    "",
		"other.com":       "",
		"empty.com":       "",
		"":                "",
		".test.com":       "",
		"com":             "",
		"www.test.com.ex": "",
	} {
		if got := ix.Match(sni); got != want {
			t.Errorf("Match(%q) = %q, want %q", sni, got, want)
		}
	}
}

// FuzzMatch compares the index with a linear reading of APISIX's rule:
// the exact name of the lowest id, else the wildcard of the lowest id
// whose suffix is the name without its first label.
func FuzzMatch(f *testing.F) {
	snis := [][]string{{"a.com", "*.a.com"}, {"*.b.a.com"}, {"a.com", "c.com"}, {"*.com"}}
	var entries []*gateway.SSLEntry
	ca := testcert.NewCA(f, "fuzz CA")
	pair := ca.Issue(f, testcert.Options{DNS: []string{"a.com"}}).TLS
	for i, s := range snis {
		entries = append(entries, &gateway.SSLEntry{ID: string(rune('1' + i)), SNIs: s, Certs: []tls.Certificate{pair}})
	}
	m := certs.NewManager(nil)
	m.Load(entries)
	ix := m.Index()
	for _, s := range []string{"a.com", "x.a.com", "x.b.a.com", "c.com", "x.com", "A.COM.", "x.y.a.com", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sni string) {
		name := strings.ToLower(strings.TrimSuffix(sni, "."))
		want := ""
		for _, e := range entries {
			for _, s := range e.SNIs {
				if s == name && want == "" {
					want = e.ID
				}
			}
		}
		if want == "" {
			if label, parent, ok := strings.Cut(name, "."); ok && label != "" && parent != "" {
				for _, e := range entries {
					for _, s := range e.SNIs {
						if s == "*."+parent && want == "" {
							want = e.ID
						}
					}
				}
			}
		}
		if got := ix.Match(sni); got != want {
			t.Fatalf("Match(%q) = %q, want %q", sni, got, want)
		}
	})
}

// server accepts TLS connections with m's configuration (plus mod), and
// echoes what they send; handshake errors go to errs.
func server(t *testing.T, cfg *tls.Config) (addr string, errs chan error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	errs = make(chan error, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					errs <- err
					return
				}
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), errs
}

func dial(addr string, cfg *tls.Config) (*tls.Conn, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	// TLS 1.3 reports a refused client certificate on the first read.
	if _, err := c.Write([]byte("x")); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func TestHandshake(t *testing.T) {
	ca := testcert.NewCA(t, "certs test CA")
	m := certs.NewManager(nil)
	both := entry(t, ca, "1", []string{"test.com"},
		testcert.Options{DNS: []string{"test.com"}}, testcert.Options{DNS: []string{"test.com"}, RSA: true})
	m.Load([]*gateway.SSLEntry{both})
	addr, errs := server(t, m.Config())
	client := func(sni string) *tls.Config { return &tls.Config{ServerName: sni, RootCAs: ca.Pool()} }

	t.Run("ecdsa by default, alpn h2", func(t *testing.T) {
		cfg := client("test.com")
		cfg.NextProtos = []string{"h2", "http/1.1"}
		c, err := dial(addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st := c.ConnectionState()
		if st.PeerCertificates[0].PublicKeyAlgorithm != x509.ECDSA {
			t.Errorf("got a %v certificate, want ECDSA", st.PeerCertificates[0].PublicKeyAlgorithm)
		}
		if st.NegotiatedProtocol != "h2" || st.Version != tls.VersionTLS13 {
			t.Errorf("protocol %q version %x", st.NegotiatedProtocol, st.Version)
		}
	})
	t.Run("rsa for a client without ecdsa", func(t *testing.T) {
		cfg := client("test.com")
		cfg.MaxVersion = tls.VersionTLS12
		cfg.CipherSuites = []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
		c, err := dial(addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if alg := c.ConnectionState().PeerCertificates[0].PublicKeyAlgorithm; alg != x509.RSA {
			t.Errorf("got a %v certificate, want RSA", alg)
		}
	})
	for name, cfg := range map[string]*tls.Config{
		"unknown sni": client("other.com"),
		"no sni":      {InsecureSkipVerify: true}, //nolint:gosec // the handshake must fail before any verification
		"tls 1.1":     {ServerName: "test.com", RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11},
		"cbc only":    {ServerName: "test.com", RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}},
	} {
		t.Run(name+" fails the handshake", func(t *testing.T) {
			if c, err := dial(addr, cfg); err == nil {
				c.Close()
				t.Fatal("handshake succeeded")
			}
			select {
			case err := <-errs:
				if name != "tls 1.1" && name != "cbc only" && !errors.Is(err, certs.ErrNoCertificate) {
					t.Errorf("server error %v, want ErrNoCertificate", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("the server saw no handshake error")
			}
		})
	}

	t.Run("a new certificate applies to new handshakes, open connections stay", func(t *testing.T) {
		open, err := dial(addr, client("test.com"))
		if err != nil {
			t.Fatal(err)
		}
		defer open.Close()
		first := open.ConnectionState().PeerCertificates[0].SerialNumber
		m.Load([]*gateway.SSLEntry{entry(t, ca, "1", []string{"test.com", "new.com"})})
		c, err := dial(addr, client("new.com"))
		if err != nil {
			t.Fatalf("the new name: %v", err)
		}
		c.Close()
		c, err = dial(addr, client("test.com"))
		if err != nil {
			t.Fatal(err)
		}
		if c.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(first) == 0 {
			t.Error("a new handshake got the old certificate")
		}
		c.Close()
		if _, err := open.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(open, make([]byte, 1)); err != nil {
			t.Errorf("the connection opened before the change: %v", err)
		}
	})
}

func TestClientCertificate(t *testing.T) {
	ca := testcert.NewCA(t, "certs test CA")
	clientCA := testcert.NewCA(t, "client CA")
	e := entry(t, ca, "1", []string{"mtls.com"})
	e.ClientCAs, e.ClientDepth = clientCA.Pool(), 1
	m := certs.NewManager(nil)
	m.Load([]*gateway.SSLEntry{e, entry(t, ca, "2", []string{"open.com"})})
	addr, _ := server(t, m.Config())
	cert := clientCA.Issue(t, testcert.Options{DNS: []string{"client"}, Client: true}).TLS
	stranger := ca.Issue(t, testcert.Options{DNS: []string{"client"}, Client: true}).TLS
	for _, tc := range []struct {
		name  string
		sni   string
		certs []tls.Certificate
		ok    bool
	}{
		{"with the client's certificate", "mtls.com", []tls.Certificate{cert}, true},
		{"without", "mtls.com", nil, false},
		{"signed by another CA", "mtls.com", []tls.Certificate{stranger}, false},
		{"another resource asks for none", "open.com", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dial(addr, &tls.Config{ServerName: tc.sni, RootCAs: ca.Pool(), Certificates: tc.certs})
			if c != nil {
				c.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestSessionTickets: a client resumes with the ticket it got; crypto/tls
// rotates the ticket key daily and refuses a ticket whose key is older
// than a week, which the test shows by moving the server's clock.
func TestSessionTickets(t *testing.T) {
	ca := testcert.NewCA(t, "certs test CA")
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	m := certs.NewManager(&tls.Config{Time: func() time.Time { return time.Unix(0, now.Load()) }})
	m.Load([]*gateway.SSLEntry{entry(t, ca, "1", []string{"test.com"})})
	addr, _ := server(t, m.Config())
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cfg := &tls.Config{ServerName: "test.com", RootCAs: ca.Pool(), ClientSessionCache: tls.NewLRUClientSessionCache(4), MaxVersion: v}
		connect := func() bool {
			c, err := dial(addr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			return c.ConnectionState().DidResume
		}
		if connect() {
			t.Fatal("the first connection resumed")
		}
		if !connect() {
			t.Errorf("version %x: a second connection did not resume", v)
		}
		now.Add(int64(25 * time.Hour)) // the key rotates; the ticket's is still accepted
		if !connect() {
			t.Errorf("version %x: no resumption a day later", v)
		}
		now.Add(int64(8 * 24 * time.Hour))
		if connect() {
			t.Errorf("version %x: resumed with a ticket whose key is 9 days old", v)
		}
	}
}

// With a fallback (automatic HTTPS), an uploaded resource still wins for
// its SNIs; other names and acme-tls/1 handshakes go to the fallback,
// which may refuse them.
func TestFallback(t *testing.T) {
	uploaded := testcert.NewCA(t, "uploaded CA")
	acme := testcert.NewCA(t, "acme CA")
	issued := map[string]*tls.Certificate{}
	for _, n := range []string{"up.test", "auto.test"} {
		p := acme.Issue(t, testcert.Options{DNS: []string{n}})
		issued[n] = &p.TLS
	}
	fallback := &tls.Config{
		NextProtos: []string{"h2", "http/1.1", "acme-tls/1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := issued[hello.ServerName]; c != nil {
				return c, nil
			}
			return nil, errors.New("not allowed")
		},
	}
	m := certs.NewManagerWithFallback(nil, fallback)
	m.Load([]*gateway.SSLEntry{entry(t, uploaded, "1", []string{"up.test"})})
	addr, _ := server(t, m.Config())
	both := x509.NewCertPool()
	both.AddCert(uploaded.Cert)
	both.AddCert(acme.Cert)
	tests := []struct {
		sni    string
		protos []string
		issuer string // "" = the handshake fails
	}{
		{"up.test", nil, "uploaded CA"},
		{"up.test", []string{"h2"}, "uploaded CA"},
		{"auto.test", []string{"h2", "http/1.1"}, "acme CA"},
		{"up.test", []string{"acme-tls/1"}, "acme CA"}, // a validation handshake
		{"other.test", nil, ""},                        // refused by the fallback
	}
	for _, tt := range tests {
		c, err := dial(addr, &tls.Config{ServerName: tt.sni, RootCAs: both, NextProtos: tt.protos})
		if tt.issuer == "" {
			if err == nil {
				c.Close()
				t.Errorf("%s %v: handshake succeeded, want refused", tt.sni, tt.protos)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %v: %v", tt.sni, tt.protos, err)
			continue
		}
		if got := c.ConnectionState().PeerCertificates[0].Issuer.CommonName; got != tt.issuer {
			t.Errorf("%s %v: issued by %q, want %q", tt.sni, tt.protos, got, tt.issuer)
		}
		c.Close()
	}
}
