package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/internal/testdep"
)

// linkgate as a Lambda function under the runtime interface emulator, built
// as make lambda ships it (no embedded store, no gateway, no load
// generator), with linkgate-extension loaded from /opt/extensions, over
// DynamoDB Local: create, getFullURL and redirect through the three event
// formats, a malformed event, then a shutdown that the extension reports
// in EMF.
func TestLambdaUnderEmulator(t *testing.T) {
	rie := testdep.Binary(t, testdep.LambdaRIE, "aws-lambda-rie")
	localAWSEnv(t)
	if os.Geteuid() != 0 {
		if testdep.InCI() {
			t.Fatal("the emulator test needs root (a mount namespace) in CI")
		}
		t.Skip("needs root: the emulator loads extensions only from /opt, bind-mounted in a private mount namespace")
	}
	table := createTable(t)
	bootstrap, err := buildFunction()
	if err != nil {
		t.Fatal(err)
	}
	help, _ := exec.Command(bootstrap, "help").Output()
	if h := string(help); !strings.Contains(h, "\n  lambda ") || strings.Contains(h, "\n  gateway ") || strings.Contains(h, "\n  bench ") {
		t.Errorf("the function build's commands are not serve's and lambda's alone:\n%s", help)
	}
	opt := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(opt, "extensions", "linkgate-extension"), "../linkgate-extension").CombinedOutput(); err != nil {
		t.Fatalf("build the extension: %v\n%s", err, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount --bind "$1" /opt && exec "$2" --runtime-interface-emulator-address "127.0.0.1:$3" "$4"`,
		"sh", opt, rie, strconv.Itoa(port), bootstrap)
	cmd.Env = append(os.Environ(), "LINKGATE_STORE=dynamodb:"+table, "LINKGATE_EXTENSION_TELEMETRY_ADDR=127.0.0.1:0",
		"AWS_LAMBDA_FUNCTION_NAME=linkgate-e2e")
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("emulator log:\n%s", logs)
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/function/invocations", port)
	eventually.True(t, 10*time.Second, "the emulator to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	type proxy struct {
		StatusCode        int
		Headers           map[string]string
		MultiValueHeaders map[string][]string
		Body              string
	}
	invoke := func(payload string) proxy {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p proxy
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 200 {
			t.Fatalf("emulator answered %d: %v", resp.StatusCode, err)
		}
		return p
	}

	// HTTP API (payload 2.0): the seed's create.
	created := invoke(`{"version":"2.0","rawPath":"/shortenURL","headers":{"host":"sho.rt","x-forwarded-proto":"https"},` +
		`"requestContext":{"stage":"$default","http":{"method":"POST","sourceIp":"192.0.2.1"}},` +
		`"isBase64Encoded":true,"body":"eyJvcmlnaW5hbFVSTCI6Imh0dHBzOi8vYXdzLmFtYXpvbi5jb20vZWMyL2dyYXZpdG9uLyJ9"}`)
	var link struct{ ShortURL, OriginalURL string }
	if created.StatusCode != 201 || json.Unmarshal([]byte(created.Body), &link) != nil || link.OriginalURL != "https://aws.amazon.com/ec2/graviton/" {
		t.Fatalf("create: %+v", created)
	}
	// REST API (payload 1.0): the seed's lookup.
	got := invoke(fmt.Sprintf(`{"resource":"/{proxy+}","path":"/getFullURL/%s","httpMethod":"GET","headers":{"Host":"sho.rt"},"requestContext":{"stage":"prod","identity":{"sourceIp":"192.0.2.1"}}}`, link.ShortURL))
	if got.StatusCode != 200 || got.Body != `"https://aws.amazon.com/ec2/graviton/"` {
		t.Errorf("getFullURL: %+v", got)
	}
	// Function URL (payload 2.0): the redirect.
	redirect := invoke(fmt.Sprintf(`{"version":"2.0","rawPath":"/%s","headers":{"host":"abc.lambda-url.us-east-1.on.aws","x-forwarded-proto":"https"},"requestContext":{"domainName":"abc.lambda-url.us-east-1.on.aws","http":{"method":"GET","sourceIp":"192.0.2.1"}}}`, link.ShortURL))
	if redirect.StatusCode != 302 || redirect.Headers["Location"] != "https://aws.amazon.com/ec2/graviton/" {
		t.Errorf("redirect: %+v", redirect)
	}
	// Not an HTTP event: a 400 proxy response, the runtime stays up.
	if bad := invoke(`{"Records":[{"eventSource":"aws:sqs"}]}`); bad.StatusCode != 400 || !strings.Contains(bad.Body, "bad_request") {
		t.Errorf("malformed event: %+v", bad)
	}
	if again := invoke(`{"version":"2.0","rawPath":"/healthz","requestContext":{"http":{"method":"GET"}}}`); again.StatusCode != 200 {
		t.Errorf("after a malformed event: %+v", again)
	}

	// Shutdown: the function closes its store, the extension gets SHUTDOWN
	// and writes its metrics.
	stopped = true
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the emulator did not stop on SIGTERM")
	}
	out := logs.String()
	for _, want := range []string{
		"External agent linkgate-extension", "Internal agent GoLangEnableSIGTERM",
		"running without telemetry: the Runtime API answered Telemetry.NotSupported",
		`"msg":"shutting down"`, "reason=SandboxTerminated",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("emulator log lacks %q", want)
		}
	}
	emf := regexp.MustCompile(`\{"_aws":.*"FunctionName":"linkgate-e2e".*"Invokes":(\d+)\}`).FindStringSubmatch(out)
	if emf == nil || emf[1] != "5" {
		t.Errorf("no EMF line counting 5 invokes: %v", emf)
	}
	if strings.Contains(out, "Killing it") {
		t.Error("the runtime was killed instead of exiting on SIGTERM")
	}
}
