package certmagic_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/certmagic"
	"github.com/linkgate/linkgate/internal/testcert"
)

// TestFilesErrors: a pair that cannot be served is a startup error
// naming the file at fault and why.
func TestFilesErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "files CA")
	good := ca.Issue(t, testcert.Options{DNS: []string{"sho.test"}})
	other := ca.Issue(t, testcert.Options{DNS: []string{"other.test"}})
	expired := ca.Issue(t, testcert.Options{DNS: []string{"sho.test"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, cert, key string
		want            []string
	}{
		{"ok", good.CertPEM, good.KeyPEM, nil},
		{"not PEM", "hello", good.KeyPEM, []string{"cert.pem", "no PEM CERTIFICATE"}},
		{"key as cert", good.KeyPEM, good.KeyPEM, []string{"cert.pem", "no PEM CERTIFICATE"}},
		{"garbled cert", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", good.KeyPEM, []string{"cert.pem", "x509"}},
		{"expired", expired.CertPEM, expired.KeyPEM, []string{"cert.pem", "expired on"}},
		{"no key", good.CertPEM, good.CertPEM, []string{"key.pem", "no PEM PRIVATE KEY"}},
		{"mismatched key", good.CertPEM, other.KeyPEM, []string{"key.pem does not match the certificate", "cert.pem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, k := write("cert.pem", tc.cert), write("key.pem", tc.key)
			f, err := certmagic.NewFiles(c, k, nil, nil)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := f.Certificate().Leaf.DNSNames[0]; got != "sho.test" {
					t.Errorf("serves %s", got)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if _, err := certmagic.NewFiles(filepath.Join(dir, "missing.pem"), filepath.Join(dir, "key.pem"), nil, nil); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("missing file: %v", err)
	}
}

// TestFilesReload: a changed pair is served after Reload; a broken one
// keeps the previous certificate.
func TestFilesReload(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "files CA")
	_, c, k := testcert.WriteFiles(t, dir, ca, ca.Issue(t, testcert.Options{DNS: []string{"one.test"}}))
	f, err := certmagic.NewFiles(c, k, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.TLSConfig()
	served := func() string {
		cert, err := cfg.GetCertificate(&tls.ClientHelloInfo{ServerName: "x"})
		if err != nil {
			t.Fatal(err)
		}
		return cert.Leaf.DNSNames[0]
	}
	if f.Changed() {
		t.Error("changed before any change")
	}
	two := ca.Issue(t, testcert.Options{DNS: []string{"two.test"}})
	writeFile(t, c, two.CertPEM)
	writeFile(t, k, two.KeyPEM)
	if !f.Changed() {
		t.Error("a rewritten pair not seen as changed")
	}
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "two.test" {
		t.Errorf("after reload serves %s", got)
	}
	writeFile(t, k, "broken")
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), k) {
		t.Errorf("broken key: %v", err)
	}
	if got := served(); got != "two.test" {
		t.Errorf("after a failed reload serves %s", got)
	}
	if got := cfg.NextProtos; strings.Join(got, ",") != "h2,http/1.1" {
		t.Errorf("NextProtos %v", got)
	}
}

func writeFile(t *testing.T, name, s string) {
	t.Helper()
	// A later modification time than the file had, whatever the clock's
	// granularity.
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	mt := fi.ModTime().Add(time.Second)
	if err := os.Chtimes(name, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseFilesFlag: --tls CERT,KEY never panics, and what it accepts
// names two non-empty files.
func FuzzParseFilesFlag(f *testing.F) {
	for _, s := range []string{"cert.pem,key.pem", "a,", ",b", "a,b,c", " a , b ", "auto"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, k, err := certmagic.ParseFilesFlag(s)
		if err == nil && (c == "" || k == "" || strings.Contains(k, ",")) {
			t.Errorf("%q accepted as %q, %q", s, c, k)
		}
	})
}
