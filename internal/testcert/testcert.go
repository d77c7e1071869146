// Package testcert makes certificate authorities and certificates for
// tests with crypto/x509: nothing is read from disk or the network, and
// every test gets its own keys.
package testcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

var serial atomic.Int64

// CA is a certificate authority made for a test.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	PEM  string
}

// NewCA returns a new ECDSA P-256 CA valid from an hour ago for a day.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb, false)
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, Key: key, PEM: pemOf("CERTIFICATE", der)}
}

// Pool is a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Options describe a certificate to issue.
type Options struct {
	DNS []string
	IPs []net.IP
	// NotBefore and NotAfter default to an hour ago and a day from now.
	NotBefore, NotAfter time.Time
	RSA                 bool // a 2048-bit RSA key instead of ECDSA P-256
	Client              bool // for client authentication instead of server
	// OCSPServer is the responder URL the certificate names.
	OCSPServer string
}

// Pair is an issued certificate and its key, as PEM and ready for tls.
type Pair struct {
	CertPEM, KeyPEM string
	TLS             tls.Certificate
	Leaf            *x509.Certificate
}

// Issue signs a certificate.
func (ca *CA) Issue(tb testing.TB, o Options) Pair {
	tb.Helper()
	return issue(tb, o, ca)
}

// SelfSigned returns a certificate signed by its own key.
func SelfSigned(tb testing.TB, o Options) Pair {
	tb.Helper()
	return issue(tb, o, nil)
}

// issue makes a certificate signed by ca, or by its own key when ca is nil.
func issue(tb testing.TB, o Options, ca *CA) Pair {
	tb.Helper()
	key := newKey(tb, o.RSA)
	now := time.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(24 * time.Hour)
	}
	usage := x509.ExtKeyUsageServerAuth
	if o.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	name := "test"
	if len(o.DNS) > 0 {
		name = o.DNS[0]
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: o.NotBefore, NotAfter: o.NotAfter, DNSNames: o.DNS, IPAddresses: o.IPs,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	if o.OCSPServer != "" {
		tmpl.OCSPServer = []string{o.OCSPServer}
	}
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		parent, signer = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	p := Pair{CertPEM: pemOf("CERTIFICATE", der), KeyPEM: pemOf("PRIVATE KEY", keyDER)}
	if p.TLS, err = tls.X509KeyPair([]byte(p.CertPEM), []byte(p.KeyPEM)); err != nil {
		tb.Fatal(err)
	}
	p.Leaf, _ = x509.ParseCertificate(der)
	return p
}

// WriteFiles writes the pair as cert.pem and key.pem (mode 0600) and the
// CA as ca.pem into dir, and returns their paths.
func WriteFiles(tb testing.TB, dir string, ca *CA, p Pair) (caFile, certFile, keyFile string) {
	tb.Helper()
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for f, s := range map[string]string{caFile: ca.PEM, certFile: p.CertPEM, keyFile: p.KeyPEM} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}

func newKey(tb testing.TB, useRSA bool) crypto.Signer {
	tb.Helper()
	var k crypto.Signer
	var err error
	if useRSA {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}
