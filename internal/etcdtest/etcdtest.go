// Package etcdtest runs a real etcd server (go.etcd.io/etcd/server/v3/embed)
// on 127.0.0.1 random ports in a temp dir, for tests. Only tests import it.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Server is a running single-member etcd.
type Server struct {
	tb         testing.TB
	dir        string
	clientPort int
	peerPort   int
	e          *embed.Etcd
	tls        *transport.TLSInfo // clients over TLS (StartTLS)
}

// Start starts etcd; it is stopped when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, dir: tb.TempDir(), clientPort: freePort(tb), peerPort: freePort(tb)}
	s.start()
	tb.Cleanup(s.Stop)
	return s
}

// StartTLS starts etcd serving clients over TLS with the server
// certificate in certFile/keyFile; clients must present a certificate
// signed by the CA in caFile (etcd's --client-cert-auth).
func StartTLS(tb testing.TB, certFile, keyFile, caFile string) *Server {
	tb.Helper()
	s := &Server{tb: tb, dir: tb.TempDir(), clientPort: freePort(tb), peerPort: freePort(tb),
		tls: &transport.TLSInfo{CertFile: certFile, KeyFile: keyFile, TrustedCAFile: caFile, ClientCertAuth: true}}
	s.start()
	tb.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.tb.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = s.dir
	cfg.LogLevel = "error"
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", s.clientPort)}
	if s.tls != nil {
		cu.Scheme = "https"
		cfg.ClientTLSInfo = *s.tls
	}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", s.peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		s.tb.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		e.Close()
		s.tb.Fatal("etcd did not become ready in 20s")
	}
	s.e = e
}

// Endpoint is "127.0.0.1:PORT".
func (s *Server) Endpoint() string { return fmt.Sprintf("127.0.0.1:%d", s.clientPort) }

// Stop stops the server (keeping its data); Restart brings it back.
func (s *Server) Stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// Restart starts a stopped server on the same ports and data.
func (s *Server) Restart() { s.start() }

func freePort(tb testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
