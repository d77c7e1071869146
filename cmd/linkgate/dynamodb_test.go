package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener/bolt/bolttest"
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
	for _, want := range []string{"table " + table + " created", "TTL enabled on expiresAt", "table " + table + "-certs created"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	// Idempotent; the table name may come from the environment too.
	out, errOut, code = runCLI(t, map[string]string{"LINKGATE_TABLE": table}, "dynamodb", "create-table")
	if code != 0 || !strings.Contains(out, "table "+table+" already exists") || !strings.Contains(out, "TTL on expiresAt is ENABLED") ||
		!strings.Contains(out, "table "+table+"-certs already exists") {
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

// store export and import work against DynamoDB: a pebble export imported
// into a table exports the same records, line for line, before and after
// the visit log is folded; imported back into pebble they are the
// original store's records, statistics included. A second import changes
// nothing.
func TestStoreExportImportDynamoDB(t *testing.T) {
	localAWSEnv(t)
	table := createTable(t)
	old, want := bolttest.Fixture(t)
	src := filepath.Join(t.TempDir(), "src")
	if _, _, err := runCmd(t, "", "store", "migrate", "--from", "bolt:"+old, "--to", "pebble:"+src); err != nil {
		t.Fatal(err)
	}
	jsonl, _, err := runCmd(t, "", "store", "export", "--store", "pebble:"+src)
	if err != nil {
		t.Fatal(err)
	}
	lines := func(s string) []string {
		l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		slices.Sort(l)
		return l
	}
	n := len(want)
	for i, want := range []string{fmt.Sprintf("%d imported, 0 already there", n), fmt.Sprintf("0 imported, %d already there, 0 conflicting", n)} {
		if out, errOut, err := runCmd(t, jsonl, "store", "import", "--store", "dynamodb:"+table); err != nil || !strings.Contains(out, want) {
			t.Fatalf("import %d: %v\n%s\n%s", i+1, err, out, errOut)
		}
	}
	exported := func(when string) string {
		t.Helper()
		out, errOut, err := runCmd(t, "", "store", "export", "--store", "dynamodb:"+table)
		if err != nil {
			t.Fatalf("export %s: %v %s", when, err, errOut)
		}
		if got, want := lines(out), lines(jsonl); !slices.Equal(got, want) {
			t.Errorf("DynamoDB export %s differs from the pebble export:\n%s\nwant\n%s", when, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		return out
	}
	exported("before the fold")
	if out, errOut, code := runCLI(t, nil, "dynamodb", "fold-visits", "--table", table); code != 0 || !regexp.MustCompile(`folded [1-9]\d* records`).MatchString(out) {
		t.Fatalf("fold-visits: exit %d\n%s\n%s", code, out, errOut)
	}
	back := exported("after the fold")
	dst := filepath.Join(t.TempDir(), "dst")
	if out, errOut, err := runCmd(t, back, "store", "import", "--store", "pebble:"+dst); err != nil {
		t.Fatalf("import into pebble: %v %s %s", err, out, errOut)
	}
	wantRecords(t, exportAll(t, dst), want)
}

// An import into DynamoDB of a link over its 400 KB item limit reports that
// line and imports the others, the plain link and the one with statistics
// (a transaction) alike; the refused link is not in the table.
func TestStoreImportDynamoDBItemTooLarge(t *testing.T) {
	localAWSEnv(t)
	table := createTable(t)
	huge := "https://big.example/" + strings.Repeat("a", 450<<10)
	jsonl := `{"id":"plain01","url":"https://a.example/"}` + "\n" +
		`{"id":"huge01","url":"` + huge + `"}` + "\n" +
		`{"id":"stats01","url":"https://b.example/","stats":{"Total":3}}` + "\n"
	out, errOut, err := runCmd(t, jsonl, "store", "import", "--store", "dynamodb:"+table)
	if err == nil || !strings.Contains(out, "2 imported, 0 already there, 0 conflicting, 1 bad lines") ||
		!strings.Contains(errOut, "line 2: huge01: URL too long for a DynamoDB item") {
		t.Fatalf("import: %v\n%s\n%s", err, out, errOut)
	}
	out, errOut, err = runCmd(t, "", "store", "export", "--store", "dynamodb:"+table)
	if err != nil {
		t.Fatalf("export: %v %s", err, errOut)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		ids = append(ids, regexp.MustCompile(`"id":"([^"]*)"`).FindStringSubmatch(l)[1])
	}
	if slices.Sort(ids); !slices.Equal(ids, []string{"plain01", "stats01"}) {
		t.Errorf("exported ids %q, want plain01 and stats01\n%s", ids, out)
	}
}
