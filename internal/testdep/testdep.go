// Package testdep finds the real components integration tests talk to
// (DynamoDB Local, redis-server, chromium, the Lambda runtime interface
// emulator, qemu). The test command (scripts/test.sh) installs and starts
// them and exports where they are; see the variables below.
//
// Outside CI a missing dependency skips the test. With CI=true it fails it:
// integration tests are never silently skipped in CI.
package testdep

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// Environment variables set by scripts/test.sh.
const (
	DynamoDBEndpoint = "LINKGATE_TEST_DYNAMODB_ENDPOINT" // http://127.0.0.1:PORT of DynamoDB Local
	RedisAddr        = "LINKGATE_TEST_REDIS_ADDR"        // 127.0.0.1:PORT of a redis-server
	RedisServer      = "LINKGATE_TEST_REDIS_SERVER"      // path of redis-server, for tests that start their own
	Chromium         = "LINKGATE_TEST_CHROMIUM"          // path of a chromium binary
	LambdaRIE        = "LINKGATE_TEST_RIE"               // path of aws-lambda-rie
	QEMUArm64        = "LINKGATE_TEST_QEMU_ARM64"        // path of qemu-aarch64(-static)
	Arm64Binary      = "LINKGATE_TEST_ARM64_BINARY"      // path of dist/linkgate_linux_arm64
	WebCheck         = "LINKGATE_TEST_WEBCHECK"          // tools/webcheck, with node_modules (axe-core, lighthouse)
)

// InCI reports whether the tests run in CI, where missing dependencies fail.
func InCI() bool { return os.Getenv("CI") == "true" }

// Env returns the value of the environment variable name. When it is empty
// the test is skipped, or failed in CI.
func Env(tb testing.TB, name string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		missing(tb, name+" is not set (scripts/test.sh sets it)")
	}
	return v
}

// Binary returns the path of an executable: the one named by the environment
// variable env if set, else file looked up in PATH. When neither exists the
// test is skipped, or failed in CI.
func Binary(tb testing.TB, env, file string) string {
	tb.Helper()
	if v := os.Getenv(env); v != "" {
		if _, err := os.Stat(v); err != nil {
			missing(tb, env+"="+v+": "+err.Error())
		}
		return v
	}
	p, err := exec.LookPath(file)
	if err != nil {
		missing(tb, file+" not found and "+env+" not set")
	}
	return p
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("required test dependency missing in CI: %s", why)
	}
	tb.Skipf("test dependency missing (fails when CI=true): %s", why)
}

// SpareProcs raises GOMAXPROCS to at least n, for tests whose target runs in
// the load generator's own process: the target's goroutines must not hold
// up a generator thread waking from epoll_wait, as a target in another
// process would not. Call it from TestMain.
func SpareProcs(n int) {
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), n))
}
