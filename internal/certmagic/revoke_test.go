package certmagic_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mholt/acmez/v3/acme"
	"golang.org/x/crypto/ocsp"

	"github.com/linkgate/linkgate/internal/certmagic"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/pebbletest"
)

// TestRevocation: a served certificate revoked at the CA through ACME
// (signed with the certificate's key, reason superseded) is replaced —
// its OCSP status (pebble's revocation state, from pebbletest's
// responder) turns Revoked at the next staple refresh, certmagic orders a
// new certificate, and the server serves it with a Good staple.
func TestRevocation(t *testing.T) {
	l := listen(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port(l.http), TLSPort: port(l.tls), AlwaysValid: true, OCSP: true})
	dir := t.TempDir()
	m, _ := newManager(t, ca, l, certmagic.Config{Dir: dir, Domains: []string{"rev.test"}, OCSPCheckInterval: 200 * time.Millisecond})
	serve(t, l, m, m.HTTPChallenge)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.ObtainSync(ctx, "rev.test"); err != nil {
		t.Fatal(err)
	}
	roots := ca.Roots(t)
	var first stapledState
	eventually.True(t, 10*time.Second, "the certificate served with a Good OCSP staple", func() bool {
		st, err := stapled(l, "rev.test", roots)
		first = st
		return err == nil && st.status == ocsp.Good
	})
	leaf := first.PeerCertificates[0]

	// Revoke it at the CA, as its holder would, with its own key.
	keys, _ := filepath.Glob(filepath.Join(dir, "certificates", "*", "rev.test", "rev.test.key"))
	if len(keys) != 1 {
		t.Fatalf("the certificate's key in storage: %v", keys)
	}
	keyPEM, err := os.ReadFile(keys[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := pebbletest.ParseKey(keyPEM)
	if err != nil {
		t.Fatalf("%s: %v", keys[0], err)
	}
	pool := x509.NewCertPool()
	rootPEM, err := os.ReadFile(ca.RootFile)
	if err != nil || !pool.AppendCertsFromPEM(rootPEM) {
		t.Fatalf("pebble's root %s: %v", ca.RootFile, err)
	}
	client := &acme.Client{Directory: ca.URL, HTTPClient: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	if err := client.RevokeCertificate(ctx, acme.Account{}, leaf, key, acme.ReasonSuperseded); err != nil {
		t.Fatal(err)
	}

	var next stapledState
	eventually.True(t, 30*time.Second, "a new certificate served in place of the revoked one", func() bool {
		next, err = stapled(l, "rev.test", roots)
		return err == nil && next.PeerCertificates[0].SerialNumber.Cmp(leaf.SerialNumber) != 0
	})
	eventually.True(t, 10*time.Second, "the new certificate's staple Good", func() bool {
		next, err = stapled(l, "rev.test", roots)
		return err == nil && next.status == ocsp.Good
	})
	if n := ca.Orders(); n != 2 {
		t.Errorf("%d orders at the CA, want the first and its replacement", n)
	}
}

// stapledState is a handshake's state and its staple's OCSP status.
type stapledState struct {
	tls.ConnectionState
	status int // ocsp.Good, Revoked, Unknown; -1: no staple
}

// stapled handshakes with the server for name and reads its OCSP staple,
// checked against the leaf's issuer.
func stapled(l listeners, name string, roots *x509.CertPool) (stapledState, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", l.tls.Addr().String(),
		&tls.Config{ServerName: name, RootCAs: roots})
	if err != nil {
		return stapledState{}, err
	}
	defer c.Close()
	st := stapledState{ConnectionState: c.ConnectionState(), status: -1}
	if len(st.OCSPResponse) > 0 && len(st.PeerCertificates) > 1 {
		r, err := ocsp.ParseResponseForCert(st.OCSPResponse, st.PeerCertificates[0], st.PeerCertificates[1])
		if err != nil {
			return st, err
		}
		st.status = r.Status
	}
	return st, nil
}
