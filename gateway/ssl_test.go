package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/internal/testcert"
)

// apisixEncrypted is what APISIX 2.14 (resty.aes, AES-128-CBC with the
// default key_encrypt_salt as key and IV) stores for apisixPlainKey; made
// with `openssl enc -aes-128-cbc -K <salt hex> -iv <salt hex> -base64 -A`.
const (
	apisixPlainKey  = "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n"
	apisixEncrypted = "YnwwDKc5vNzo0OU4StTRQTcByI8Kg0RHtJHO3ObdwzqsJLnD+rS3PNIwSO1X695+lil56nBwiglbrTiUqZXgfg=="
)

func TestKeyCipherAsAPISIX(t *testing.T) {
	kc, err := gateway.NewKeyCipher(gateway.DefaultKeySalt)
	if err != nil {
		t.Fatal(err)
	}
	if got := kc.Encrypt(apisixPlainKey); got != apisixEncrypted {
		t.Errorf("Encrypt = %q, want APISIX's %q", got, apisixEncrypted)
	}
	if got, err := kc.Decrypt(apisixEncrypted); err != nil || got != apisixPlainKey {
		t.Errorf("Decrypt = %q, %v", got, err)
	}
	if got := kc.Encrypt(apisixEncrypted); got != apisixEncrypted {
		t.Error("an encrypted key was encrypted again")
	}
	other, _ := gateway.NewKeyCipher("0123456789abcdef")
	if _, err := other.Decrypt(apisixEncrypted); err == nil {
		t.Error("decrypting with the wrong salt succeeded")
	}
	var none *gateway.KeyCipher
	if _, err := none.Decrypt(apisixEncrypted); err == nil || !strings.Contains(err.Error(), "salt") {
		t.Errorf("decrypt without a salt: %v", err)
	}
	if _, err := gateway.NewKeyCipher("short"); err == nil {
		t.Error("a 5-byte salt was accepted")
	}
}

func TestSSLLoad(t *testing.T) {
	ca := testcert.NewCA(t, "ssl test CA")
	ec := ca.Issue(t, testcert.Options{DNS: []string{"test.com"}})
	rsa := ca.Issue(t, testcert.Options{DNS: []string{"test.com"}, RSA: true})
	other := ca.Issue(t, testcert.Options{DNS: []string{"other.com"}})
	now := time.Now()
	expired := ca.Issue(t, testcert.Options{DNS: []string{"test.com"}, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	future := ca.Issue(t, testcert.Options{DNS: []string{"test.com"}, NotBefore: now.Add(time.Hour), NotAfter: now.Add(48 * time.Hour)})
	kc, _ := gateway.NewKeyCipher(gateway.DefaultKeySalt)
	one := 1
	tests := []struct {
		name    string
		ssl     gateway.SSL
		wantErr string
		certs   int
	}{
		{"ecdsa", gateway.SSL{Cert: ec.CertPEM, Key: ec.KeyPEM, SNI: "Test.com"}, "", 1},
		{"rsa and ecdsa", gateway.SSL{Cert: rsa.CertPEM, Key: rsa.KeyPEM, Certs: []string{ec.CertPEM}, Keys: []string{ec.KeyPEM}, SNIs: []string{"test.com", "*.test.com"}}, "", 2},
		{"encrypted key", gateway.SSL{Cert: ec.CertPEM, Key: kc.Encrypt(ec.KeyPEM), SNI: "test.com"}, "", 1},
		{"client ca", gateway.SSL{Cert: ec.CertPEM, Key: ec.KeyPEM, SNI: "test.com", Client: &struct {
			CA    string `json:"ca"`
			Depth *int   `json:"depth"`
		}{CA: ca.PEM, Depth: &one}}, "", 1},
		{"mismatched pair", gateway.SSL{Cert: ec.CertPEM, Key: other.KeyPEM, SNI: "test.com"}, "the private key does not match the certificate", 0},
		{"key of another type", gateway.SSL{Cert: ec.CertPEM, Key: rsa.KeyPEM, SNI: "test.com"}, "does not match", 0},
		{"malformed cert", gateway.SSL{Cert: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", Key: ec.KeyPEM, SNI: "test.com"}, "failed to parse cert: ", 0},
		{"not pem", gateway.SSL{Cert: strings.Repeat("x", 200), Key: ec.KeyPEM, SNI: "test.com"}, "failed to parse cert: no PEM certificate block", 0},
		{"key as cert", gateway.SSL{Cert: ec.KeyPEM, Key: ec.KeyPEM, SNI: "test.com"}, `failed to parse cert: unexpected PEM block "PRIVATE KEY"`, 0},
		{"malformed key", gateway.SSL{Cert: ec.CertPEM, Key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", SNI: "test.com"}, "failed to parse key: ", 0},
		{"cert as key", gateway.SSL{Cert: ec.CertPEM, Key: ec.CertPEM, SNI: "test.com"}, "failed to parse key: no PEM private key block", 0},
		{"expired", gateway.SSL{Cert: expired.CertPEM, Key: expired.KeyPEM, SNI: "test.com"}, "the certificate expired at ", 0},
		{"not yet valid", gateway.SSL{Cert: future.CertPEM, Key: future.KeyPEM, SNI: "test.com"}, "the certificate is not valid yet: valid from ", 0},
		{"bad sni", gateway.SSL{Cert: ec.CertPEM, Key: ec.KeyPEM, SNIs: []string{"test.com", "te st.com"}}, `invalid sni "te st.com": not a host name`, 0},
		{"wildcard in the middle", gateway.SSL{Cert: ec.CertPEM, Key: ec.KeyPEM, SNI: "a.*.com"}, `invalid sni "a.*.com"`, 0},
		{"no sni", gateway.SSL{Cert: ec.CertPEM, Key: ec.KeyPEM}, "missing sni or snis", 0},
		{"more certs than keys", gateway.SSL{Cert: ec.CertPEM, Key: ec.KeyPEM, Certs: []string{rsa.CertPEM}, SNI: "test.com"}, "mismatched number of certs and keys", 0},
		{"bad second pair", gateway.SSL{Cert: ec.CertPEM, Key: ec.KeyPEM, Certs: []string{rsa.CertPEM}, Keys: []string{ec.KeyPEM}, SNI: "test.com"}, "failed to handle cert-key pair[1]: the private key does not match", 0},
		{"undecryptable key", gateway.SSL{Cert: ec.CertPEM, Key: "bm90IGEga2V5", SNI: "test.com"}, "failed to decrypt", 0},
		{"bad client ca", gateway.SSL{Cert: ec.CertPEM, Key: ec.KeyPEM, SNI: "test.com", Client: &struct {
			CA    string `json:"ca"`
			Depth *int   `json:"depth"`
		}{CA: "nope"}}, "failed to validate client_cert", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := tt.ssl.Load(kc, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Certs) != tt.certs {
				t.Errorf("%d pairs, want %d", len(e.Certs), tt.certs)
			}
			for _, c := range e.Certs {
				if c.Leaf == nil {
					t.Error("a pair without its parsed leaf")
				}
			}
			for _, s := range e.SNIs {
				if s != strings.ToLower(s) {
					t.Errorf("sni %q not lower case", s)
				}
			}
		})
	}
}

func TestCheckSNI(t *testing.T) {
	for _, ok := range []string{"a.com", "*.a.com", "localhost", "xn--bcher-kva.example", "a-b.c_d.e"} {
		if err := gateway.CheckSNI(ok); err != nil {
			t.Errorf("CheckSNI(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "*", "*.", "a..com", ".a.com", "-a.com", "a-.com", "a.com.", "**.a.com", "1.2.3.4:80", "[::1]", "a b", strings.Repeat("a", 64) + ".com"} {
		if err := gateway.CheckSNI(bad); err == nil {
			t.Errorf("CheckSNI(%q) accepted", bad)
		}
	}
}

// FuzzParseCertKey: any input is parsed or refused with an error, never a
// panic, and a pair it accepts has a leaf valid now.
func FuzzParseCertKey(f *testing.F) {
	ca := testcert.NewCA(f, "fuzz CA")
	p := ca.Issue(f, testcert.Options{DNS: []string{"fuzz.test"}})
	f.Add(p.CertPEM, p.KeyPEM)
	f.Add(p.CertPEM+ca.PEM, p.KeyPEM)
	f.Add(p.KeyPEM, p.CertPEM)
	f.Add("-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n", "")
	now := time.Now()
	f.Fuzz(func(t *testing.T, cert, key string) {
		pair, err := gateway.ParseCertKey(cert, key, now)
		if err != nil {
			return
		}
		if pair.Leaf == nil || now.After(pair.Leaf.NotAfter) || now.Before(pair.Leaf.NotBefore) {
			t.Fatalf("accepted a pair without a valid leaf")
		}
	})
}

// FuzzCheckSNI: what CheckSNI accepts is a lower- or upper-case host name
// of labels, with at most a leading wildcard.
func FuzzCheckSNI(f *testing.F) {
	for _, s := range []string{"a.com", "*.a.com", "a..b", "*", "é.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if gateway.CheckSNI(s) != nil {
			return
		}
		name := strings.TrimPrefix(s, "*.")
		if strings.Contains(name, "*") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
			t.Fatalf("accepted %q", s)
		}
	})
}
