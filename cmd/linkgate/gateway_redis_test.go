package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/redistest"
	"github.com/linkgate/linkgate/internal/testcert"
)

// TestGatewayRedisTLS runs the real command against a redis-server that
// speaks only TLS and knows only an ACL user: two gateways trusting the
// test CA (--ssl-trusted-certificate) share one limit-count counter, so
// between them exactly count requests pass; a gateway on the system roots
// cannot verify the server and answers 500, as APISIX when redis fails.
func TestGatewayRedisTLS(t *testing.T) {
	ca := testcert.NewCA(t, "redis e2e CA")
	pair := ca.Issue(t, testcert.Options{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	addr := redistest.Start(t, redistest.Options{CertPEM: pair.CertPEM, KeyPEM: pair.KeyPEM,
		Users: []string{"default off", "gw on >gw-pass ~* &* +@all"}})
	host, port, _ := net.SplitHostPort(addr)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, []byte(ca.PEM), 0o600); err != nil {
		t.Fatal(err)
	}
	store := "bolt:" + filepath.Join(t.TempDir(), "gw.db")
	g1 := startGatewayCmd(t, "--config-store", store, "--ssl-trusted-certificate", caFile)
	up := helloUpstream(t)
	route := `{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"` + up + `":1}},"plugins":{"limit-count":{` +
		`"count":3,"time_window":60,"key_type":"constant","policy":"redis","redis_host":"` + host + `","redis_port":` + port +
		`,"redis_ssl":true,"redis_ssl_verify":true,"redis_username":"gw","redis_password":"gw-pass"}}}`
	if code, body := do(t, "PUT", g1.url+"/apisix/admin/routes/1", route, "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT route: %d %s", code, body)
	}
	// A bolt store is one process's: the second gateway gets the route through its own store.
	g2 := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw2.db"), "--ssl-trusted-certificate", caFile)
	if code, body := do(t, "PUT", g2.url+"/apisix/admin/routes/1", route, "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT route: %d %s", code, body)
	}
	var got []string
	for i := range 6 {
		g := []*runningGateway{g1, g2}[i%2]
		var code int
		eventually.True(t, 2*time.Second, "route loaded", func() bool {
			code, _ = do(t, "GET", g.url+"/hello", "")
			return code != 404
		})
		got = append(got, strconv.Itoa(code))
	}
	if s := strings.Join(got, " "); s != "200 200 200 503 503 503" {
		t.Errorf("two gateways on one TLS redis: %s, want 3 passed then 503", s)
	}

	g3 := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw3.db"))
	if code, body := do(t, "PUT", g3.url+"/apisix/admin/routes/1", route, "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT route: %d %s", code, body)
	}
	var code int
	eventually.True(t, 2*time.Second, "route loaded", func() bool {
		code, _ = do(t, "GET", g3.url+"/hello", "")
		return code != 404
	})
	if code != 500 {
		t.Errorf("a gateway on the system roots: %d, want 500 (the server's certificate is not verified)", code)
	}
	if !strings.Contains(g3.stderr.String(), "certificate signed by unknown authority") {
		t.Errorf("the gateway did not log why redis failed:\n%s", g3.stderr)
	}
}
