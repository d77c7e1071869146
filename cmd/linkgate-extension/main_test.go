package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/internal/testdep"
)

func runExt(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"/opt/extensions/linkgate-extension"}, args...),
		func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), cli.ExitCode(err)
}

func TestOutsideLambda(t *testing.T) {
	if _, _, code := runExt(t, nil); code != 2 {
		t.Errorf("without AWS_LAMBDA_RUNTIME_API: exit %d, want 2", code)
	}
	_, errOut, code := runExt(t, nil, "--help")
	if code != 0 || !strings.Contains(errOut, "LINKGATE_EXTENSION_TELEMETRY_ADDR") {
		t.Errorf("--help: exit %d, %q", code, errOut)
	}
}

// A bad setting reaches Lambda as an init error of type
// Extension.ConfigInvalid, under the extension's file name.
func TestBadSettingIsAnInitError(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/2020-01-01/extension/register":
			calls = append(calls, "register "+r.Header.Get("Lambda-Extension-Name"))
			w.Header().Set("Lambda-Extension-Identifier", "id-1")
			io.WriteString(w, `{"functionName":"f"}`)
		case "/2020-01-01/extension/init/error":
			calls = append(calls, "init/error "+r.Header.Get("Lambda-Extension-Function-Error-Type"))
			w.WriteHeader(http.StatusAccepted)
		default:
			calls = append(calls, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	env := map[string]string{
		"AWS_LAMBDA_RUNTIME_API":                  strings.TrimPrefix(srv.URL, "http://"),
		"LINKGATE_EXTENSION_TELEMETRY_TIMEOUT_MS": "soon",
	}
	_, _, code := runExt(t, env)
	if code == 0 {
		t.Error("exit 0 with a bad setting")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(calls, "; "); got != "register linkgate-extension; init/error Extension.ConfigInvalid" {
		t.Errorf("calls: %s", got)
	}
}

// The extension stays small: standard library and its own packages only.
func TestStandardLibraryOnly(t *testing.T) {
	allowed := map[string]bool{
		"github.com/linkgate/linkgate/internal/cli":     true,
		"github.com/linkgate/linkgate/lambda/extension": true,
		// the extension's JSON strings, shared with the access log; it
		// imports only the standard library (lambda/deps_test.go)
		"github.com/linkgate/linkgate/internal/jsonquote": true,
	}
	for _, dep := range testdep.NonStandardImports(t, "github.com/linkgate/linkgate/cmd/linkgate-extension") {
		if !allowed[dep] {
			t.Errorf("linkgate-extension depends on %s", dep)
		}
	}
}

// The budget: a stripped binary of at most 6 MB (Rust's was 12.3 MB,
// C# AOT's 36.4 MB). Built the way make lambda builds it.
func TestBinarySize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	const budget = 6 << 20
	for _, arch := range []string{"arm64", "amd64"} {
		out := filepath.Join(t.TempDir(), "linkgate-extension")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", arch, err, b)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("linux/%s: %.2f MB", arch, float64(fi.Size())/1e6)
		if fi.Size() > budget {
			t.Errorf("linux/%s binary is %d bytes, over the 6 MiB budget", arch, fi.Size())
		}
	}
}
