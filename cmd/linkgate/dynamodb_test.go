package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/testdep"
)

// localAWSEnv points the AWS SDK's standard configuration chain (which
// reads the process environment itself) at the test's DynamoDB Local.
func localAWSEnv(t *testing.T) {
	t.Helper()
	endpoint := testdep.Env(t, testdep.DynamoDBEndpoint)
	for k, v := range map[string]string{
		"AWS_REGION":                  "us-east-1",
		"AWS_ACCESS_KEY_ID":           "test",
		"AWS_SECRET_ACCESS_KEY":       "test",
		"AWS_ENDPOINT_URL_DYNAMODB":   endpoint,
		"AWS_CONFIG_FILE":             "/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		t.Setenv(k, v)
	}
}

func TestDynamoDBCreateTable(t *testing.T) {
	localAWSEnv(t)
	table := fmt.Sprintf("lg-cmd-%d", time.Now().UnixNano())
	out, errOut, code := runCLI(t, nil, "dynamodb", "create-table", "--table", table, "--wait")
	if code != 0 {
		t.Fatalf("create-table: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"table " + table + " created", "TTL enabled on expiresAt"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	// Idempotent; the table name may come from the environment too.
	out, errOut, code = runCLI(t, map[string]string{"LINKGATE_TABLE": table}, "dynamodb", "create-table")
	if code != 0 || !strings.Contains(out, "already exists") || !strings.Contains(out, "TTL on expiresAt is ENABLED") {
		t.Errorf("second create-table: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestDynamoDBUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dynamodb"}, 2, "no subcommand"},
		{[]string{"dynamodb", "drop-table"}, 2, "unknown subcommand"},
		{[]string{"dynamodb", "create-table", "extra"}, 2, "takes no arguments"},
		{[]string{"dynamodb", "create-table", "--table", ""}, 2, "must not be empty"},
		{[]string{"dynamodb", "create-table", "--help"}, 0, "Usage: linkgate dynamodb create-table"},
	}
	for _, tt := range tests {
		_, errOut, code := runCLI(t, nil, tt.args...)
		if code != tt.code || (tt.code == 0 && !strings.Contains(errOut, tt.want)) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

// fold-visits folds a table's visit log (an empty one: nothing to do).
func TestDynamoDBFoldVisits(t *testing.T) {
	localAWSEnv(t)
	table := createTable(t)
	out, errOut, code := runCLI(t, nil, "dynamodb", "fold-visits", "--table", table)
	if code != 0 || !strings.Contains(out, "folded 0 records") {
		t.Errorf("fold-visits: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
