package main

import (
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testcert"
)

// TestGatewayExtendedConnect: the gateway announces HTTP/2 extended
// CONNECT (RFC 8441, SETTINGS_ENABLE_CONNECT_PROTOCOL=1) on its TLS
// listener, so WebSocket over HTTP/2 works in the shipped binary; its
// HTTP/2 server is its own, so no GODEBUG setting is involved.
func TestGatewayExtendedConnect(t *testing.T) {
	g := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw.db"))
	ca := testcert.NewCA(t, "xconnect CA")
	pair := ca.Issue(t, testcert.Options{DNS: []string{"ws.test.com"}})
	if code, body := do(t, "PUT", g.url+"/apisix/admin/ssl/1", sslBody(t, pair, "ws.test.com"), "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT ssl: %d %s", code, body)
	}
	cfg := &tls.Config{ServerName: "ws.test.com", RootCAs: ca.Pool(), NextProtos: []string{"h2"}}
	var conn *tls.Conn
	eventually.True(t, 2*time.Second, "the ssl resource served", func() bool {
		c, err := tls.Dial("tcp", g.tlsAddr, cfg)
		conn = c
		return err == nil
	})
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2", p)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	if v, ok := s.Value(http2.SettingEnableConnectProtocol); !ok || v != 1 {
		t.Errorf("SETTINGS_ENABLE_CONNECT_PROTOCOL = %d, %v; want 1", v, ok)
	}
}
