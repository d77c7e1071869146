// Package certs is the TLS side of linkgate gateway's listener: it turns
// the configuration's ssl resources into the certificate a handshake
// presents, chosen by SNI as APISIX's radixtree_sni does — an exact name
// first, then a "*.example.com" wildcard covering one label; a client
// asking for a name no resource covers (or for none) fails the handshake.
//
// The index of names is immutable and swapped atomically on every
// configuration change, so a new or changed certificate applies to the
// next handshake and never to a connection already open. Everything else
// is crypto/tls: TLS 1.2 and 1.3 with AEAD cipher suites only, ALPN h2
// and http/1.1, and session tickets whose keys crypto/tls rotates itself
// (a new key every day, each accepted for a week; Config.Time is the
// clock, which the tests move).
package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/linkgate/linkgate/gateway"
)

// Index maps SNIs to the configurations of their ssl resources. It is
// immutable.
type Index struct {
	exact map[string]*served
	wild  map[string]*served // "example.com" for "*.example.com"
	n     int
}

// served is one resource's handshake configuration.
type served struct {
	id  string
	cfg *tls.Config
}

// Len is the number of resources indexed.
func (ix *Index) Len() int { return ix.n }

// lookup returns the configuration for server name sni, or nil.
func (ix *Index) lookup(sni string) *served {
	if c, ok := ix.exact[sni]; ok {
		return c
	}
	if label, parent, ok := strings.Cut(sni, "."); ok && label != "" && parent != "" {
		return ix.wild[parent]
	}
	return nil
}

// Match returns the id of the resource serving sni ("" if none), as a
// handshake would choose it.
func (ix *Index) Match(sni string) string {
	if s := ix.lookup(normalize(sni)); s != nil {
		return s.id
	}
	return ""
}

// normalize lower-cases a client's server name and drops a trailing dot.
func normalize(sni string) string {
	sni = strings.TrimSuffix(sni, ".")
	for i := 0; i < len(sni); i++ {
		if c := sni[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(sni)
		}
	}
	return sni
}

// Manager serves the current Index to handshakes.
type Manager struct {
	base     *tls.Config
	fallback *tls.Config // nil: names no resource covers fail
	idx      atomic.Pointer[Index]
}

// NewManager returns a manager with no certificates; base (may be nil)
// supplies Time and other settings the tests need, and is otherwise
// replaced by Config's defaults.
func NewManager(base *tls.Config) *Manager { return NewManagerWithFallback(base, nil) }

// NewManagerWithFallback is NewManager whose handshakes for names no ssl
// resource covers go to fallback — automatic HTTPS (linkgate gateway
// --acme), which presents the certificate it obtained for the name or
// refuses the handshake — as do ACME's TLS-ALPN-01 validation handshakes
// (ALPN acme-tls/1). An uploaded resource wins over fallback for its SNIs.
func NewManagerWithFallback(base, fallback *tls.Config) *Manager {
	m := &Manager{base: serverDefaults(base), fallback: fallback}
	m.idx.Store(&Index{})
	return m
}

// acmeTLS1 is the ALPN protocol of ACME's TLS-ALPN-01 challenge (RFC 8737).
const acmeTLS1 = "acme-tls/1"

// cipherSuites are TLS 1.2's forward-secret AEAD suites (TLS 1.3's are
// not configurable), as Mozilla's "intermediate" profile and APISIX's
// ssl_ciphers.
var cipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

func serverDefaults(base *tls.Config) *tls.Config {
	c := &tls.Config{}
	if base != nil {
		c = base.Clone()
	}
	c.MinVersion = tls.VersionTLS12
	c.CipherSuites = cipherSuites
	if len(c.NextProtos) == 0 {
		c.NextProtos = []string{"h2", "http/1.1"}
	}
	return c
}

// ErrNoCertificate is the handshake error for a server name no resource
// covers.
var ErrNoCertificate = errors.New("no certificate for this server name")

// Config is the listener's tls.Config: each handshake gets the
// configuration of the resource its SNI selects, from the Index in force
// when it starts.
func (m *Manager) Config() *tls.Config {
	c := m.base.Clone()
	c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if hello.ServerName == "" {
			return nil, fmt.Errorf("%w: the client sent no SNI", ErrNoCertificate)
		}
		if m.fallback != nil && slices.Contains(hello.SupportedProtos, acmeTLS1) {
			return m.fallback, nil
		}
		if s := m.idx.Load().lookup(normalize(hello.ServerName)); s != nil {
			return s.cfg, nil
		}
		if m.fallback != nil {
			return m.fallback, nil
		}
		return nil, fmt.Errorf("%w: %q", ErrNoCertificate, hello.ServerName)
	}
	return c
}

// Load builds an index of entries and serves it to the handshakes that
// start from now on. An SNI claimed by several resources goes to the
// lowest id.
func (m *Manager) Load(entries []*gateway.SSLEntry) {
	m.idx.Store(m.build(entries))
}

// Index is the index in force.
func (m *Manager) Index() *Index { return m.idx.Load() }

func (m *Manager) build(entries []*gateway.SSLEntry) *Index {
	ix := &Index{exact: map[string]*served{}, wild: map[string]*served{}}
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b *gateway.SSLEntry) int { return strings.Compare(a.ID, b.ID) })
	for _, e := range sorted {
		if len(e.Certs) == 0 {
			continue
		}
		c := &served{id: e.ID, cfg: m.entryConfig(e)}
		ix.n++
		for _, sni := range e.SNIs {
			if parent, ok := strings.CutPrefix(sni, "*."); ok {
				if _, taken := ix.wild[parent]; !taken {
					ix.wild[parent] = c
				}
			} else if _, taken := ix.exact[sni]; !taken {
				ix.exact[sni] = c
			}
		}
	}
	return ix
}

// entryConfig is the configuration of one resource's handshakes: its
// certificates (crypto/tls picks the first the client supports, so an
// ECDSA and an RSA pair serve both kinds of client) and, with a client CA,
// client certificate verification.
func (m *Manager) entryConfig(e *gateway.SSLEntry) *tls.Config {
	c := m.base.Clone()
	c.Certificates = e.Certs
	if e.ClientCAs != nil {
		c.ClientCAs = e.ClientCAs
		c.ClientAuth = tls.RequireAndVerifyClientCert
		depth := e.ClientDepth
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			// nginx's ssl_verify_depth: intermediates between the client's
			// certificate and the CA.
			for _, chain := range cs.VerifiedChains {
				if len(chain)-2 <= depth {
					return nil
				}
			}
			return fmt.Errorf("client certificate chain longer than the verify depth %d", depth)
		}
	}
	return c
}
