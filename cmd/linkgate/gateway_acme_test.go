//go:build !functiononly

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/etcdtest"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/pebbletest"
	"github.com/linkgate/linkgate/internal/testcert"
)

// TestGatewayACMECluster runs two real gateways with --acme on one etcd
// against Let's Encrypt's test CA (pebble, validating by HTTP-01 or
// TLS-ALPN-01 on the first gateway's listeners): the host of a route
// labelled acme: "true" and a --acme-sni name are each ordered once, at
// the CA, and both gateways serve the same certificate; an uploaded ssl
// resource wins for its SNI (no order for it); a name nothing asks for
// fails its handshake and places no order.
func TestGatewayACMECluster(t *testing.T) {
	srv := etcdtest.Start(t)
	httpPort, tlsPort := pebbletest.FreePort(t), pebbletest.FreePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: tlsPort})
	common := []string{"--config-store", "etcd://" + srv.Endpoint() + "?prefix=/apisix",
		"--acme", "--acme-ca", ca.URL, "--acme-ca-root", ca.RootFile, "--acme-sni", "listed.test"}
	a := startGatewayCmd(t, append(common, "--listen", fmt.Sprintf("127.0.0.1:%d", httpPort), "--listen-tls", fmt.Sprintf("127.0.0.1:%d", tlsPort))...)
	b := startGatewayCmd(t, common...)

	up := helloUpstream(t)
	uploaded := testcert.NewCA(t, "uploaded CA")
	puts := []struct{ path, body string }{
		{"/apisix/admin/routes/1", `{"uri":"/hello","host":"auto.test","labels":{"acme":"true"},"upstream":{"type":"roundrobin","nodes":{"` + up + `":1}}}`},
		{"/apisix/admin/routes/2", `{"uri":"/hello","host":"up.test","labels":{"acme":"true"},"upstream":{"type":"roundrobin","nodes":{"` + up + `":1}}}`},
		{"/apisix/admin/ssl/1", sslBody(t, uploaded.Issue(t, testcert.Options{DNS: []string{"up.test"}}), "up.test")},
	}
	for _, p := range puts {
		if code, body := do(t, "PUT", a.url+p.path, p.body, "X-API-KEY", seedKey); code != 201 {
			t.Fatalf("PUT %s: %d %s", p.path, code, body)
		}
	}
	roots := ca.Roots(t)
	roots.AddCert(uploaded.Cert)
	handshake := func(g *runningGateway, sni string) (*x509.Certificate, error) {
		conn, err := tls.Dial("tcp", g.tlsAddr, &tls.Config{ServerName: sni, RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	// Both gateways see the routes before the first handshakes.
	for _, g := range []*runningGateway{a, b} {
		eventually.True(t, 5*time.Second, "the routes reach both gateways", func() bool {
			req, _ := http.NewRequest("GET", g.url+"/hello", nil)
			req.Host = "auto.test"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
	}

	// The first handshakes for auto.test reach both gateways at once: one
	// of them orders, under the lock in etcd, and both then serve it.
	serials := map[string]map[string]string{} // name → gateway → serial
	var mu sync.Mutex
	for _, name := range []string{"auto.test", "listed.test"} {
		serials[name] = map[string]string{}
		var wg sync.WaitGroup
		for gname, g := range map[string]*runningGateway{"a": a, "b": b} {
			wg.Go(func() {
				eventually.True(t, 60*time.Second, gname+" serves a certificate for "+name, func() bool {
					cert, err := handshake(g, name)
					if err != nil {
						return false
					}
					mu.Lock()
					serials[name][gname] = cert.SerialNumber.String()
					mu.Unlock()
					return cert.Issuer.CommonName != "uploaded CA"
				})
			})
		}
		wg.Wait()
		if s := serials[name]; s["a"] == "" || s["a"] != s["b"] {
			t.Errorf("%s: gateway a serves certificate %s, b %s: want one, the same", name, s["a"], s["b"])
		}
	}
	for _, g := range []*runningGateway{a, b} {
		cert, err := handshake(g, "up.test")
		if err != nil || cert.Issuer.CommonName != "uploaded CA" {
			t.Errorf("up.test: %v, %v; want the uploaded resource's certificate", cert, err)
		}
		if _, err := handshake(g, "other.test"); err == nil {
			t.Error("other.test: a handshake succeeded; nothing asks for it")
		}
	}
	if n := ca.Orders(); n != 2 {
		t.Errorf("%d orders at the CA, want 2 (auto.test, listed.test)\n%s", n, ca.Log())
	}
	if strings.Contains(ca.Log(), "up.test") || strings.Contains(ca.Log(), "other.test") {
		t.Errorf("the CA saw up.test or other.test:\n%s", ca.Log())
	}
}

// One gateway on a bolt store keeps its certificates in an acme directory
// beside the store, and serves them from there after a restart without a
// new order.
func TestGatewayACMEBolt(t *testing.T) {
	httpPort, tlsPort := pebbletest.FreePort(t), pebbletest.FreePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: tlsPort})
	dir := t.TempDir()
	args := []string{"--config-store", "bolt:" + filepath.Join(dir, "gw.db"), "--acme", "--acme-ca", ca.URL, "--acme-ca-root", ca.RootFile,
		"--acme-sni", "one.test", "--listen", fmt.Sprintf("127.0.0.1:%d", httpPort), "--listen-tls", fmt.Sprintf("127.0.0.1:%d", tlsPort)}
	roots := ca.Roots(t)
	serial := func(g *runningGateway) string {
		var s string
		eventually.True(t, 60*time.Second, "a certificate for one.test", func() bool {
			conn, err := tls.Dial("tcp", g.tlsAddr, &tls.Config{ServerName: "one.test", RootCAs: roots})
			if err != nil {
				return false
			}
			defer conn.Close()
			s = conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
			return true
		})
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := startGatewayCtx(t, ctx, args...)
	s1 := serial(first)
	cancel()
	first.wait(t)
	if _, err := os.Stat(filepath.Join(dir, "acme", "certificates")); err != nil {
		t.Errorf("no certificates beside the store: %v", err)
	}
	second := startGatewayCmd(t, args...)
	if s2 := serial(second); s2 != s1 {
		t.Errorf("after a restart the gateway serves certificate %s, want the stored %s", s2, s1)
	}
	if n := ca.Orders(); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
}
