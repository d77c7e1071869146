package redis_test

import (
	"crypto/x509"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway/plugin/redis"
	"github.com/linkgate/linkgate/internal/redistest"
	"github.com/linkgate/linkgate/internal/testcert"
)

var ping = redis.NewScript(`return {1}`)

// users: the default user is off, so a client must name alice (ACL).
var users = []string{"default off", "alice on >s3cret ~* &* +@all"}

func conf(t *testing.T, addr string, mod func(*redis.Conf)) redis.Conf {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	c := redis.Conf{Policy: redis.Redis, RedisHost: host, RedisPort: p, RedisTimeout: 2000,
		RedisUsername: "alice", RedisPassword: "s3cret", RedisSSL: true, RedisSSLVerify: true}
	mod(&c)
	return c
}

// TestTLSAndACL talks to real redis-servers serving TLS only: one with a
// certificate from a test CA, one self-signed. A client connects only with
// TLS, the right user and password and, when it verifies, the CA that
// issued the server's certificate for the host it dials.
func TestTLSAndACL(t *testing.T) {
	ca := testcert.NewCA(t, "redis test CA")
	good := ca.Issue(t, testcert.Options{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	addr := redistest.Start(t, redistest.Options{CertPEM: good.CertPEM, KeyPEM: good.KeyPEM, Users: users})

	self := testcert.SelfSigned(t, testcert.Options{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	selfAddr := redistest.Start(t, redistest.Options{CertPEM: self.CertPEM, KeyPEM: self.KeyPEM, Users: users})

	other := testcert.NewCA(t, "another CA")
	wrongName := ca.Issue(t, testcert.Options{IPs: []net.IP{net.IPv4(127, 0, 0, 2)}})
	wrongNameAddr := redistest.Start(t, redistest.Options{CertPEM: wrongName.CertPEM, KeyPEM: wrongName.KeyPEM, Users: users})

	for _, tc := range []struct {
		name  string
		roots *x509.CertPool
		addr  string
		mod   func(*redis.Conf)
		want  string // "" or a part of the error
	}{
		{"verified", ca.Pool(), addr, func(*redis.Conf) {}, ""},
		{"another CA", other.Pool(), addr, func(*redis.Conf) {}, "certificate signed by unknown authority"},
		{"system roots", nil, addr, func(*redis.Conf) {}, "certificate signed by unknown authority"},
		{"another CA, not verified", other.Pool(), addr, func(c *redis.Conf) { c.RedisSSLVerify = false }, ""},
		{"self-signed, verified", ca.Pool(), selfAddr, func(*redis.Conf) {}, "certificate signed by unknown authority"},
		{"self-signed, not verified", ca.Pool(), selfAddr, func(c *redis.Conf) { c.RedisSSLVerify = false }, ""},
		{"other host name", ca.Pool(), wrongNameAddr, func(*redis.Conf) {}, "certificate is valid for 127.0.0.2, not 127.0.0.1"},
		{"no TLS", ca.Pool(), addr, func(c *redis.Conf) { c.RedisSSL = false }, "EOF"},
		{"no user", ca.Pool(), addr, func(c *redis.Conf) { c.RedisUsername = "" }, "WRONGPASS"},
		{"wrong password", ca.Pool(), addr, func(c *redis.Conf) { c.RedisPassword = "guess" }, "WRONGPASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := redis.NewPoolWithRoots(tc.roots)
			defer pool.Close()
			c, err := pool.Client(conf(t, tc.addr, tc.mod))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Ints(ping, []string{"k"})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("script failed: %v", err)
			case tc.want == "" && (len(got) != 1 || got[0] != 1):
				t.Fatalf("script returned %v", got)
			case tc.want != "" && err == nil:
				t.Fatalf("script ran, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q, want one with %q", err, tc.want)
			}
		})
	}
}

// Clients with different TLS or ACL options are not shared.
func TestPoolKeysTLSAndUser(t *testing.T) {
	pool := redis.NewPool()
	defer pool.Close()
	base := redis.Conf{Policy: redis.Redis, RedisHost: "127.0.0.1", RedisPort: 1}
	seen := map[*redis.Client]string{}
	for name, mod := range map[string]func(*redis.Conf){
		"plain":  func(*redis.Conf) {},
		"ssl":    func(c *redis.Conf) { c.RedisSSL = true },
		"verify": func(c *redis.Conf) { c.RedisSSL, c.RedisSSLVerify = true, true },
		"user":   func(c *redis.Conf) { c.RedisUsername = "alice" },
	} {
		c := base
		mod(&c)
		cl, err := pool.Client(c)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[cl]; ok {
			t.Errorf("%s shares the client of %s", name, prev)
		}
		seen[cl] = name
		if again, _ := pool.Client(c); again != cl {
			t.Errorf("%s: a second client for the same options", name)
		}
	}
}
