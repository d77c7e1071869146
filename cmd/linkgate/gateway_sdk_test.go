//go:build !functiononly

package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/testcert"
	"github.com/linkgate/linkgate/internal/testdep"
)

// TestAPISIXSDK points a published client of APISIX's admin API at a live
// `linkgate gateway --admin-api-version v3`: apisix-sdk 0.0.6 (npm,
// DemoMacro/apisix-sdk), driven by tools/apisixsdk/*.test.mjs, which port
// the cases of its own suite (playground/tests) to node:test. No Go client
// of the admin API is served by the module proxy here (the ingress
// controller's, the Terraform providers' and apisix-go answer 403), and PyPI
// is not reachable; this is the one published client the test command can
// install. The cases also send traffic through what the SDK configured.
// What differs from APISIX is written beside each case and in
// docs/gateway.md.
func TestAPISIXSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := filepath.Join("..", "..", "tools", "apisixsdk")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "apisix-sdk")); err != nil {
		if testdep.InCI() {
			t.Fatalf("apisix-sdk: %v (scripts/install-deps.sh installs it)", err)
		}
		t.Skipf("apisix-sdk: %v (scripts/install-deps.sh installs it)", err)
	}
	node := testdep.Binary(t, "LINKGATE_TEST_NODE", "node")

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello from upstream"))
	}))
	defer upstream.Close()
	pair := testcert.SelfSigned(t, testcert.Options{DNS: []string{"localhost", "apisix-sdk.test"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	tmp := t.TempDir()
	certFile, keyFile := filepath.Join(tmp, "cert.pem"), filepath.Join(tmp, "key.pem")
	for f, s := range map[string]string{certFile: pair.CertPEM, keyFile: pair.KeyPEM} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	const key = "apisix-sdk-admin-key"
	g := startGatewayJSON(t, nil, "--admin-api-version", "v3", "--admin-key", key,
		"--admin-listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0")
	var addrs struct{ Admin, Control string }
	for line := range strings.Lines(g.logs.String()) {
		if strings.Contains(line, `"msg":"gateway listening"`) {
			if err := json.Unmarshal([]byte(line), &addrs); err != nil {
				t.Fatal(err)
			}
		}
	}
	if addrs.Admin == "" || addrs.Control == "" {
		t.Fatalf("no admin or control address in the log:\n%s", g.logs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"APISIX_ADMIN_URL=http://"+addrs.Admin, "APISIX_ADMIN_KEY="+key,
		"APISIX_CONTROL_URL=http://"+addrs.Control, "APISIX_GATEWAY_URL="+g.url,
		"APISIX_UPSTREAM="+strings.TrimPrefix(upstream.URL, "http://"),
		"APISIX_CERT_FILE="+certFile, "APISIX_KEY_FILE="+keyFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // node --test runs each file in a child
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of the group
	}
	if err != nil {
		t.Fatalf("apisix-sdk's cases against linkgate: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ℹ fail 0") {
		t.Fatalf("no summary with 0 failures:\n%s", out)
	}
	t.Logf("%s", out)
}
