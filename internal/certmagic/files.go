package certmagic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Files serves one certificate from a PEM certificate (chain) file and a
// PEM key file, and loads them again when either changes: a renewal by
// another tool (certbot, a secret mount) takes effect without a restart.
// A pair that does not load keeps the one being served, and is logged.
type Files struct {
	CertFile, KeyFile string

	log  *slog.Logger
	now  func() time.Time
	cert atomic.Pointer[tls.Certificate]
	seen atomic.Pointer[[2]fileStamp]
}

// fileStamp is what tells a file has changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

// ParseFilesFlag splits "cert.pem,key.pem".
func ParseFilesFlag(v string) (certFile, keyFile string, err error) {
	c, k, ok := strings.Cut(v, ",")
	c, k = strings.TrimSpace(c), strings.TrimSpace(k)
	if !ok || c == "" || k == "" || strings.Contains(k, ",") {
		return "", "", fmt.Errorf("%q: want CERT.pem,KEY.pem", v)
	}
	return c, k, nil
}

// NewFiles loads certFile and keyFile. The error names the file at fault
// and why: no PEM certificate, a certificate that does not parse or has
// expired, no key, a key that does not match the certificate.
func NewFiles(certFile, keyFile string, logger *slog.Logger, now func() time.Time) (*Files, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	f := &Files{CertFile: certFile, KeyFile: keyFile, log: logger, now: now}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Reload loads the files again; on error the certificate served stays.
func (f *Files) Reload() error {
	st, err := f.stamps()
	if err != nil {
		return err
	}
	c, err := loadPair(f.CertFile, f.KeyFile, f.now())
	if err != nil {
		return err
	}
	f.cert.Store(c)
	f.seen.Store(&st)
	return nil
}

func (f *Files) stamps() ([2]fileStamp, error) {
	var st [2]fileStamp
	for i, name := range []string{f.CertFile, f.KeyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return st, fmt.Errorf("TLS: %w", err)
		}
		st[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	return st, nil
}

// Changed reports whether either file differs from what was loaded.
func (f *Files) Changed() bool {
	st, err := f.stamps()
	if err != nil {
		return false // a file being replaced: look again next time
	}
	return st != *f.seen.Load()
}

// Watch looks at the files every interval until ctx is done and reloads
// them when they changed, logging the outcome.
func (f *Files) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !f.Changed() {
			continue
		}
		if err := f.Reload(); err != nil {
			f.log.Error("TLS certificate not reloaded; serving the previous one", "cert", f.CertFile, "key", f.KeyFile, "reason", err)
			st, _ := f.stamps() // do not retry the same broken files every tick
			f.seen.Store(&st)
			continue
		}
		f.log.Info("TLS certificate reloaded", "cert", f.CertFile, "names", f.cert.Load().Leaf.DNSNames, "not_after", f.cert.Load().Leaf.NotAfter)
	}
}

// Certificate is the certificate being served.
func (f *Files) Certificate() *tls.Certificate { return f.cert.Load() }

// TLSConfig returns the TLS listener's configuration serving the files'
// certificate (ALPN h2, http/1.1).
func (f *Files) TLSConfig() *tls.Config {
	return serverConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return f.cert.Load(), nil }, NextProtos[:2])
}

// loadPair reads and checks a certificate and key pair.
func loadPair(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS key: %w", err)
	}
	block, rest := pem.Decode(certPEM)
	for block != nil && block.Type != "CERTIFICATE" {
		block, rest = pem.Decode(rest)
	}
	if block == nil {
		return nil, fmt.Errorf("TLS certificate %s: no PEM CERTIFICATE block in it", certFile)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s: %w", certFile, err)
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("TLS certificate %s: expired on %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if k, _ := pem.Decode(keyPEM); k == nil || !strings.Contains(k.Type, "PRIVATE KEY") {
		return nil, fmt.Errorf("TLS key %s: no PEM PRIVATE KEY block in it", keyFile)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return nil, fmt.Errorf("TLS key %s does not match the certificate %s: %w", keyFile, certFile, err)
		}
		return nil, fmt.Errorf("TLS key %s: %w", keyFile, err)
	}
	if c.Leaf == nil {
		return nil, errors.New("TLS certificate: no leaf") // Go ≥ 1.23 sets it
	}
	return &c, nil
}
