// Package redistest starts a throwaway Debian redis-server for a test,
// optionally serving TLS only with a given certificate and with ACL users,
// and stops it when the test ends.
package redistest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testdep"
)

// Options describe the server.
type Options struct {
	// CertPEM and KeyPEM, when set, make the server speak TLS only (its
	// cleartext port is closed); clients are not asked for certificates.
	CertPEM, KeyPEM string
	// Users are ACL rules (redis.conf's "user" lines without the word),
	// e.g. "alice on >secret ~* &* +@all"; "default off" disables the
	// password-less default user.
	Users []string
}

// Start starts redis-server on 127.0.0.1 and returns its address. Without
// redis-server the test is skipped, or failed in CI.
func Start(tb testing.TB, o Options) string {
	tb.Helper()
	bin := testdep.Binary(tb, testdep.RedisServer, "redis-server")
	port := freePort(tb)
	dir := tb.TempDir()
	args := []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}
	if o.CertPEM != "" {
		cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		for f, s := range map[string]string{cert: o.CertPEM, key: o.KeyPEM} {
			if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
				tb.Fatal(err)
			}
		}
		// redis wants a CA file even when it asks no client for a certificate.
		args = append(args, "--port", "0", "--tls-port", port, "--tls-cert-file", cert, "--tls-key-file", key,
			"--tls-ca-cert-file", cert, "--tls-auth-clients", "no")
	} else {
		args = append(args, "--port", port)
	}
	for _, u := range o.Users {
		args = append(append(args, "--user"), strings.Fields(u)...)
	}
	log := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, append(args, "--logfile", log)...)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("redis-server: %v", err)
	}
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", port)
	eventually.True(tb, 10*time.Second, "redis-server ready on "+addr, func() bool {
		b, _ := os.ReadFile(log)
		select {
		case <-exited:
			tb.Fatalf("redis-server exited: %v\n%s", werr, b)
		default:
		}
		return bytes.Contains(b, []byte("Ready to accept connections"))
	})
	return addr
}

func freePort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
