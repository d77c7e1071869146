package gateway

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SSL is one APISIX ssl resource: the certificates (with their keys) the
// TLS listener presents to clients asking for one of its SNIs.
type SSL struct {
	ID    string   `json:"-"`
	Cert  string   `json:"cert"`
	Key   string   `json:"key"`
	Certs []string `json:"certs"` // more pairs, e.g. RSA beside ECDSA
	Keys  []string `json:"keys"`
	SNI   string   `json:"sni"`
	SNIs  []string `json:"snis"`
	// Client asks clients for a certificate signed by CA (mutual TLS).
	Client *struct {
		CA    string `json:"ca"`
		Depth *int   `json:"depth"`
	} `json:"client"`
	Status        *int  `json:"status"`
	ValidityStart int64 `json:"validity_start"`
	ValidityEnd   int64 `json:"validity_end"`

	entry *SSLEntry // loaded by Config.Apply
}

// putSSL decodes, loads and keeps an ssl resource: one whose pairs do not
// parse, do not match or are not valid now is skipped.
func (c *Config) putSSL(id string, doc map[string]any, reg *Registry) error {
	s, err := Decode[SSL](doc)
	if err != nil {
		return err
	}
	s.ID = id
	if s.entry, err = s.Load(reg.SSLKeys(), time.Now()); err != nil {
		return invalidf("%v", err)
	}
	c.SSLs[id] = s
	return nil
}

// checkSSL is apisix.ssl.check_ssl_conf, stricter: the schema, then every
// pair parsed, matching and valid now, and every SNI a host name; it
// fills validity_start and validity_end in from the main certificate.
func checkSSL(doc map[string]any, kc *KeyCipher) error {
	if err := schemaCheck(sslSchema, doc); err != nil {
		return err
	}
	s, err := Decode[SSL](doc)
	if err != nil {
		return invalidf("invalid configuration: %v", err)
	}
	e, err := s.Load(kc, time.Now())
	if err != nil {
		return invalidf("%v", err)
	}
	leaf := e.Certs[0].Leaf
	doc["validity_start"] = json.Number(strconv.FormatInt(leaf.NotBefore.Unix(), 10))
	doc["validity_end"] = json.Number(strconv.FormatInt(leaf.NotAfter.Unix(), 10))
	return nil
}

// EncryptSSLKeys replaces the private keys of an ssl document by their
// encryption with kc, as APISIX stores them (no-op for a nil kc).
func EncryptSSLKeys(doc map[string]any, kc *KeyCipher) {
	if k, ok := doc["key"].(string); ok {
		doc["key"] = kc.Encrypt(k)
	}
	if ks, ok := doc["keys"].([]any); ok {
		for i, k := range ks {
			if s, ok := k.(string); ok {
				ks[i] = kc.Encrypt(s)
			}
		}
	}
}

// WithoutSSLKeys returns an ssl value without its private keys, as the
// admin API shows it.
func WithoutSSLKeys(value []byte) []byte {
	v, err := DecodeJSON(value)
	doc, ok := v.(map[string]any)
	if err != nil || !ok {
		return value
	}
	delete(doc, "key")
	delete(doc, "keys")
	out, err := json.Marshal(doc)
	if err != nil {
		return value
	}
	return out
}

// AllSNIs returns the resource's snis, or its sni.
func (s *SSL) AllSNIs() []string {
	if len(s.SNIs) > 0 {
		return s.SNIs
	}
	if s.SNI != "" {
		return []string{s.SNI}
	}
	return nil
}

// Enabled reports whether the resource serves (status 1, the default).
func (s *SSL) Enabled() bool { return s.Status == nil || *s.Status == 1 }

// SSLEntry is an ssl resource ready to serve: keys decrypted, pairs
// parsed and checked.
type SSLEntry struct {
	ID   string
	SNIs []string // lower case; "*.example.com" covers one label
	// Certs are the resource's pairs, the main one first, each with its
	// Leaf parsed.
	Certs []tls.Certificate
	// ClientCAs, when not nil, verify client certificates to ClientDepth
	// intermediates.
	ClientCAs   *x509.CertPool
	ClientDepth int
}

// KeyCipher is APISIX's encryption of private keys at rest
// (apisix.ssl.key_encrypt_salt): AES-128-CBC with the 16-byte salt as key
// and IV, base64. APISIX 2.14 encrypts with "edd1c9f0985e76a2" unless
// configured otherwise, so an etcd it wrote holds keys encrypted so. A nil
// *KeyCipher stores keys as given.
type KeyCipher struct {
	block cipher.Block
	iv    []byte
}

// DefaultKeySalt is APISIX 2.14's default key_encrypt_salt.
const DefaultKeySalt = "edd1c9f0985e76a2"

// NewKeyCipher returns the cipher of salt, which must be 16 bytes; ""
// gives nil (keys are stored as given).
func NewKeyCipher(salt string) (*KeyCipher, error) {
	if salt == "" {
		return nil, nil
	}
	if len(salt) != 16 {
		return nil, fmt.Errorf("key encryption salt must be 16 bytes, got %d", len(salt))
	}
	b, err := aes.NewCipher([]byte(salt))
	if err != nil {
		return nil, err
	}
	return &KeyCipher{block: b, iv: []byte(salt)}, nil
}

// Encrypt encrypts a PEM key as APISIX does; anything not PEM ("---"
// prefix) is returned as is (already encrypted).
func (k *KeyCipher) Encrypt(key string) string {
	if k == nil || !strings.HasPrefix(key, "---") {
		return key
	}
	pad := aes.BlockSize - len(key)%aes.BlockSize
	buf := append([]byte(key), bytes.Repeat([]byte{byte(pad)}, pad)...)
	cipher.NewCBCEncrypter(k.block, k.iv).CryptBlocks(buf, buf)
	return base64.StdEncoding.EncodeToString(buf)
}

// Decrypt returns the PEM of a stored key: as is if it is PEM, else
// decrypted.
func (k *KeyCipher) Decrypt(key string) (string, error) {
	if strings.HasPrefix(key, "---") {
		return key, nil
	}
	if k == nil {
		return "", errors.New("the key is not PEM and no key encryption salt is configured to decrypt it")
	}
	buf, err := base64.StdEncoding.DecodeString(strings.TrimSpace(key))
	if err != nil || len(buf) == 0 || len(buf)%aes.BlockSize != 0 {
		return "", errors.New("failed to decrypt previous encrypted key: not base64 of AES blocks")
	}
	cipher.NewCBCDecrypter(k.block, k.iv).CryptBlocks(buf, buf)
	pad := int(buf[len(buf)-1])
	if pad == 0 || pad > aes.BlockSize || !bytes.Equal(buf[len(buf)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return "", errors.New("failed to decrypt previous encrypted key: wrong salt or corrupt value")
	}
	return string(buf[:len(buf)-pad]), nil
}

// ParseCertKey parses one certificate chain and its private key (both
// PEM) and checks that they belong together and that the certificate is
// valid at now. Errors say which of these failed.
func ParseCertKey(certPEM, keyPEM string, now time.Time) (tls.Certificate, error) {
	leaf, err := parseLeaf(certPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	if b, _ := pem.Decode([]byte(keyPEM)); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return tls.Certificate{}, errors.New("failed to parse key: no PEM private key block")
	}
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return tls.Certificate{}, errors.New("the private key does not match the certificate")
		}
		return tls.Certificate{}, fmt.Errorf("failed to parse key: %v", strings.TrimPrefix(err.Error(), "tls: "))
	}
	pair.Leaf = leaf
	if err := checkValidity(leaf, now); err != nil {
		return tls.Certificate{}, err
	}
	return pair, nil
}

// parseLeaf parses the first certificate of a PEM chain and checks that
// every block of it is a certificate.
func parseLeaf(certPEM string) (*x509.Certificate, error) {
	rest := []byte(certPEM)
	var leaf *x509.Certificate
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("failed to parse cert: unexpected PEM block %q", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("failed to parse cert: %v", err)
		}
		if leaf == nil {
			leaf = c
		}
	}
	if leaf == nil {
		return nil, errors.New("failed to parse cert: no PEM certificate block")
	}
	return leaf, nil
}

func checkValidity(c *x509.Certificate, now time.Time) error {
	switch {
	case now.Before(c.NotBefore):
		return fmt.Errorf("the certificate is not valid yet: valid from %s", c.NotBefore.UTC().Format(time.RFC3339))
	case now.After(c.NotAfter):
		return fmt.Errorf("the certificate expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// CheckSNI reports why s is not a name a client can ask for: a DNS host
// name, optionally with a leading "*." wildcard label. (APISIX's pattern
// also lets IP addresses and brackets through; clients never send those
// as SNI.)
func CheckSNI(s string) error {
	name := strings.TrimPrefix(s, "*.")
	if len(name) == 0 || len(s) > 253 {
		return fmt.Errorf("invalid sni %q: not a host name", s)
	}
	for _, label := range strings.Split(name, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("invalid sni %q: not a host name", s)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("invalid sni %q: not a host name", s)
			}
		}
	}
	return nil
}

// Load decrypts, parses and checks the resource at now: every SNI a host
// name, as many keys as certs, every pair parsed, matching and valid, the
// client CA parsed.
func (s *SSL) Load(kc *KeyCipher, now time.Time) (*SSLEntry, error) {
	snis := s.AllSNIs()
	if len(snis) == 0 {
		return nil, errors.New("missing sni or snis")
	}
	e := &SSLEntry{ID: s.ID}
	for _, sni := range snis {
		if err := CheckSNI(sni); err != nil {
			return nil, err
		}
		e.SNIs = append(e.SNIs, strings.ToLower(sni))
	}
	if len(s.Certs) != len(s.Keys) {
		return nil, errors.New("mismatched number of certs and keys")
	}
	certs := append([]string{s.Cert}, s.Certs...)
	keys := append([]string{s.Key}, s.Keys...)
	for i := range certs {
		key, err := kc.Decrypt(keys[i])
		if err == nil {
			var pair tls.Certificate
			if pair, err = ParseCertKey(certs[i], key, now); err == nil {
				e.Certs = append(e.Certs, pair)
				continue
			}
		}
		if i == 0 {
			return nil, err
		}
		return nil, fmt.Errorf("failed to handle cert-key pair[%d]: %v", i, err)
	}
	if s.Client != nil {
		e.ClientCAs = x509.NewCertPool()
		if !e.ClientCAs.AppendCertsFromPEM([]byte(s.Client.CA)) {
			return nil, errors.New("failed to validate client_cert: failed to parse cert: no PEM certificate block")
		}
		e.ClientDepth = 1
		if s.Client.Depth != nil {
			e.ClientDepth = *s.Client.Depth
		}
	}
	return e, nil
}
