// Package certmagic is linkgate's automatic HTTPS: the adapter over
// github.com/caddyserver/certmagic (Caddy's ACME engine) that `linkgate
// serve` and `linkgate gateway` share. It turns flags into a certmagic
// configuration — the ACME CA and the roots to trust for it, the account's
// e-mail, the storage of certificates, accounts and locks, HTTP-01 and
// TLS-ALPN-01 challenges, on-demand issuance behind an allow-check and a
// rate limit — and hands back a *tls.Config offering h2, http/1.1 and
// acme-tls/1. Files is the other source of certificates: a PEM
// certificate and key, reloaded when they change.
//
// No ACME or X.509 code is written here: orders, challenges, renewal,
// OCSP stapling and locking are certmagic's.
package certmagic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cm "github.com/caddyserver/certmagic"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"golang.org/x/time/rate"
)

// Storage is where certificates, ACME accounts and locks live: certmagic's
// interface, implemented by its file storage (one instance) and by the
// shared stores' adapters (many instances).
type Storage = cm.Storage

// LetsEncrypt is the default ACME directory: Let's Encrypt production.
const LetsEncrypt = cm.LetsEncryptProductionCA

// NextProtos is what the TLS listener offers by ALPN: HTTP/2, HTTP/1.1,
// and acme-tls/1 for TLS-ALPN-01 challenges.
var NextProtos = []string{"h2", "http/1.1", "acme-tls/1"}

// Config configures automatic HTTPS.
type Config struct {
	// CA is the ACME directory URL (default LetsEncrypt).
	CA string
	// Email is the ACME account's contact (optional).
	Email string
	// CARoot is a PEM file of root certificates to trust, instead of the
	// system's, for the CA's own HTTPS (a private or test CA).
	CARoot string
	// Storage holds certificates, accounts and locks. Default: certmagic's
	// file storage under Dir.
	Storage Storage
	// Dir is the file storage's directory when Storage is nil.
	Dir string
	// Domains get certificates at Manage, renewed in the background.
	Domains []string
	// Allow decides whether a name that has no certificate may get one at
	// its first handshake (on-demand); nil: no on-demand issuance. It runs
	// before any ACME order and before a certificate is loaded from
	// storage for that name, so an SNI it refuses places no order.
	Allow func(ctx context.Context, name string) error
	// OrderRate and OrderBurst bound the orders of new certificates for
	// names not in Domains (on-demand ones): at most OrderBurst at once,
	// refilled at one per OrderRate. Default: 10, one per minute.
	OrderRate  time.Duration
	OrderBurst int
	// ListenHost, HTTPPort and TLSPort are where this server answers
	// HTTP-01 (its cleartext listener) and TLS-ALPN-01 (its TLS listener),
	// which is where the CA must connect: 80 and 443 for a public CA.
	// certmagic finds the port in use and lets this server answer.
	ListenHost        string
	HTTPPort, TLSPort int
	// DisableHTTP01 and DisableTLSALPN01 turn a challenge type off.
	DisableHTTP01, DisableTLSALPN01 bool
	// RenewalWindowRatio is the part of a certificate's life left when it
	// is renewed (certmagic's default, 1/3, when 0); RenewCheckInterval
	// how often certificates are checked (certmagic's default when 0).
	RenewalWindowRatio float64
	RenewCheckInterval time.Duration
	// OCSPCheckInterval is how often the OCSP staples are refreshed when
	// stale (certmagic's default, 1 h, when 0); a certificate whose fresh
	// staple says Revoked is replaced at once (TestRevocation).
	OCSPCheckInterval time.Duration
	// Logger receives certmagic's log lines and the outcome of each order
	// (the domain, and the CA's reason when it is refused).
	Logger *slog.Logger
	// Now is the clock of the order rate limit (default time.Now).
	Now func() time.Time
	// OnEvent, when set, also receives certmagic's events
	// ("cert_obtaining", "cert_obtained", "cert_failed", ...), after this
	// package has handled them.
	OnEvent func(ctx context.Context, event string, data map[string]any)
}

// Manager obtains, renews and serves certificates by ACME.
type Manager struct {
	cfg    Config
	cache  *cm.Cache
	magic  *cm.Config // Config.Domains, managed from Manage on
	onDem  *cm.Config // on-demand, behind Config.Allow; nil without
	issuer *cm.ACMEIssuer
	log    *slog.Logger
	static map[string]bool // Config.Domains, lower case

	mu        sync.Mutex
	limiter   *rate.Limiter
	closeOnce sync.Once
}

// ErrRateLimited refuses an on-demand order beyond Config.OrderRate.
var ErrRateLimited = errors.New("on-demand certificate orders rate-limited")

// New builds a Manager from cfg. It contacts no CA: orders start at
// Manage, or at a handshake for an allowed name.
func New(cfg Config) (*Manager, error) {
	if cfg.CA == "" {
		cfg.CA = LetsEncrypt
	}
	if !strings.HasPrefix(cfg.CA, "https://") {
		return nil, fmt.Errorf("ACME CA %q: not an https:// URL", cfg.CA)
	}
	if cfg.Storage == nil {
		if cfg.Dir == "" {
			return nil, errors.New("ACME: neither a storage nor a directory for certificates")
		}
		cfg.Storage = &cm.FileStorage{Path: cfg.Dir}
	}
	if cfg.OrderRate <= 0 {
		cfg.OrderRate = time.Minute
	}
	if cfg.OrderBurst <= 0 {
		cfg.OrderBurst = 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for _, d := range cfg.Domains {
		if d == "" || strings.ContainsAny(d, "/: ") {
			return nil, fmt.Errorf("ACME: domain %q: not a host name", d)
		}
	}
	var roots *x509.CertPool
	if cfg.CARoot != "" {
		pem, err := os.ReadFile(cfg.CARoot)
		if err != nil {
			return nil, fmt.Errorf("ACME CA root: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ACME CA root %s: no PEM certificate in it", cfg.CARoot)
		}
	}
	m := &Manager{
		cfg:     cfg,
		log:     cfg.Logger,
		static:  map[string]bool{},
		limiter: rate.NewLimiter(rate.Every(cfg.OrderRate), cfg.OrderBurst),
	}
	for _, d := range cfg.Domains {
		m.static[strings.ToLower(d)] = true
	}
	zl := zapLogger(cfg.Logger)
	m.cache = cm.NewCache(cm.CacheOptions{
		GetConfigForCert:   m.configFor,
		RenewCheckInterval: cfg.RenewCheckInterval,
		OCSPCheckInterval:  cfg.OCSPCheckInterval,
		Logger:             zl,
	})
	tmpl := cm.Config{
		Storage:            cfg.Storage,
		RenewalWindowRatio: cfg.RenewalWindowRatio,
		OnEvent:            m.onEvent,
		Logger:             zl,
	}
	m.magic = cm.New(m.cache, tmpl)
	m.issuer = cm.NewACMEIssuer(m.magic, cm.ACMEIssuer{
		CA:                      cfg.CA,
		Email:                   cfg.Email,
		Agreed:                  true,
		TrustedRoots:            roots,
		ListenHost:              cfg.ListenHost,
		AltHTTPPort:             cfg.HTTPPort,
		AltTLSALPNPort:          cfg.TLSPort,
		DisableHTTPChallenge:    cfg.DisableHTTP01,
		DisableTLSALPNChallenge: cfg.DisableTLSALPN01,
		Logger:                  zl,
	})
	m.magic.Issuers = []cm.Issuer{quietIssuer{m.issuer}}
	if cfg.Allow != nil {
		// A second configuration over the same cache, storage and issuer:
		// certmagic's Manage only allow-lists names on an on-demand one,
		// and Config.Domains are to be ordered from the start.
		tmpl.OnDemand = &cm.OnDemandConfig{DecisionFunc: cfg.Allow}
		tmpl.Issuers = m.magic.Issuers
		m.onDem = cm.New(m.cache, tmpl)
	}
	return m, nil
}

// configFor is the certmagic configuration that renews c.
func (m *Manager) configFor(c cm.Certificate) (*cm.Config, error) {
	if m.onDem != nil {
		for _, n := range c.Names {
			if !m.static[strings.ToLower(n)] {
				return m.onDem, nil
			}
		}
	}
	return m.magic, nil
}

// quietIssuer is the ACME issuer that never prompts: certmagic asks on
// the terminal for an e-mail address when an interactive order (a
// handshake's) has none, which a server must not do.
type quietIssuer struct{ *cm.ACMEIssuer }

var _ cm.PreChecker = quietIssuer{}

func (q quietIssuer) PreCheck(ctx context.Context, names []string, _ bool) error {
	return q.ACMEIssuer.PreCheck(ctx, names, false)
}

// onEvent logs the outcome of orders and rate-limits on-demand ones:
// returning an error from "cert_obtaining" aborts the order before it
// reaches the CA.
func (m *Manager) onEvent(ctx context.Context, event string, data map[string]any) error {
	name, _ := data["identifier"].(string)
	var err error
	switch event {
	case "cert_obtaining":
		renewal, _ := data["renewal"].(bool)
		if !renewal && !m.static[strings.ToLower(name)] {
			m.mu.Lock()
			ok := m.limiter.AllowN(m.cfg.Now(), 1)
			m.mu.Unlock()
			if !ok {
				err = fmt.Errorf("%s: %w (burst %d, one per %s)", name, ErrRateLimited, m.cfg.OrderBurst, m.cfg.OrderRate)
				m.log.Warn("certificate order refused", "domain", name, "reason", err)
				err = cm.ErrNoRetry{Err: err} // the handshake fails now, not after certmagic's retries
			}
		}
	case "cert_obtained":
		m.log.Info("certificate obtained", "domain", name, "renewal", data["renewal"], "issuer", data["issuer"])
	case "cert_failed":
		m.log.Error("certificate order failed", "domain", name, "renewal", data["renewal"], "reason", data["error"])
	}
	if m.cfg.OnEvent != nil {
		m.cfg.OnEvent(ctx, event, data)
	}
	return err
}

// Manage starts obtaining (or loading from storage) the certificates of
// Config.Domains and keeps them renewed; it returns at once. A CA that
// cannot be reached is retried with backoff in the background, while the
// server serves what it has.
func (m *Manager) Manage(ctx context.Context) error {
	if len(m.cfg.Domains) == 0 {
		return nil
	}
	if err := m.magic.ManageAsync(ctx, m.cfg.Domains); err != nil {
		return fmt.Errorf("ACME: manage %s: %w", strings.Join(m.cfg.Domains, ","), err)
	}
	return nil
}

// ObtainSync obtains (or loads) name's certificate and returns once it has
// it or the order failed: for tests and tools.
func (m *Manager) ObtainSync(ctx context.Context, name string) error {
	if err := m.magic.ManageSync(ctx, []string{name}); err != nil {
		return fmt.Errorf("ACME: %s: %w", name, err)
	}
	return nil
}

// TLSConfig returns the configuration of the TLS listener: certmagic's
// certificate selection (on-demand issuance and acme-tls/1 challenge
// certificates included), TLS 1.2 and up, ALPN h2, http/1.1, acme-tls/1.
func (m *Manager) TLSConfig() *tls.Config {
	if m.onDem != nil {
		return serverConfig(m.onDem.GetCertificate, NextProtos)
	}
	return serverConfig(m.magic.GetCertificate, NextProtos)
}

// serverConfig is the TLS listener's configuration around getCert.
func serverConfig(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), protos []string) *tls.Config {
	return &tls.Config{
		GetCertificate: getCert,
		NextProtos:     append([]string(nil), protos...),
		MinVersion:     tls.VersionTLS12,
		// Go's default suites for TLS 1.2 minus CBC (no forward secrecy
		// problem, but testssl rates CBC's LUCKY13 exposure).
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}

// HTTPChallenge answers an ACME HTTP-01 challenge request
// (/.well-known/acme-challenge/…) of an order this instance, or one
// sharing its storage, placed; false if r is not one.
func (m *Manager) HTTPChallenge(w http.ResponseWriter, r *http.Request) bool {
	return m.issuer.HandleHTTPChallenge(w, r)
}

// challengePrefix is the path of HTTP-01 challenge requests.
const challengePrefix = "/.well-known/acme-challenge/"

// FastHTTPChallenge is HTTPChallenge for a fasthttp server; requests
// outside /.well-known/acme-challenge/ return false untouched.
func (m *Manager) FastHTTPChallenge(ctx *fasthttp.RequestCtx) bool {
	if !strings.HasPrefix(string(ctx.Path()), challengePrefix) {
		return false
	}
	handled := false
	fasthttpadaptor.NewFastHTTPHandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled = m.HTTPChallenge(w, r)
	})(ctx)
	return handled
}

// Close stops the renewal and maintenance goroutines; it may be called
// more than once.
func (m *Manager) Close() {
	m.closeOnce.Do(m.cache.Stop)
}

// FileStorage is certmagic's file storage under dir: certificates in
// dir/certificates, accounts in dir/acme, locks in dir/locks.
func FileStorage(dir string) Storage {
	return &cm.FileStorage{Path: filepath.Clean(dir)}
}
