package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/syncbuf"
)

// createTable runs `linkgate dynamodb create-table` for a fresh table of
// the test's DynamoDB Local and returns its name.
func createTable(t *testing.T) string {
	t.Helper()
	table := fmt.Sprintf("lg-serve-%d", time.Now().UnixNano())
	if _, errOut, code := runCLI(t, nil, "dynamodb", "create-table", "--table", table); code != 0 {
		t.Fatalf("create-table: exit %d: %s", code, errOut)
	}
	return table
}

// sdkClient is a client as any AWS tool would build it from the same
// environment (the seed's app does exactly this).
func sdkClient(t *testing.T) *ddb.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ddb.NewFromConfig(cfg, func(o *ddb.Options) { o.DisableValidateResponseChecksum = true })
}

func TestServeDynamoDB(t *testing.T) {
	localAWSEnv(t)
	table := createTable(t)
	s := startServe(t, nil, "--store", "dynamodb:"+table, "--admin-key", "k3y", "--store-timeout", "10s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve logs:\n%s", s.logs)
		}
	})

	// The seed's two commands, then a redirect.
	id := shorten(t, s.URL, "https://aws.amazon.com/ec2/graviton/")
	if status, _, body := call(t, "GET", s.URL+"/getFullURL/"+id, ""); status != 200 || body != `"https://aws.amazon.com/ec2/graviton/"` {
		t.Errorf("GET /getFullURL: %d %q", status, body)
	}
	for range 3 {
		if status, hdr, _ := call(t, "GET", s.URL+"/"+id, ""); status != 302 || hdr.Get("Location") != "https://aws.amazon.com/ec2/graviton/" {
			t.Errorf("redirect: %d %q", status, hdr.Get("Location"))
		}
	}

	// An item the seed's app wrote (only shortURL and originalURL).
	_, err := sdkClient(t).PutItem(context.Background(), &ddb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"shortURL":    &types.AttributeValueMemberS{Value: "Seed_Item-"},
		"originalURL": &types.AttributeValueMemberS{Value: "https://seed.example/p?q=1&r=2"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := call(t, "GET", s.URL+"/getFullURL/Seed_Item-", ""); status != 200 || body != `"https://seed.example/p?q=1\u0026r=2"` {
		t.Errorf("seed item via /getFullURL: %d %q", status, body)
	}
	if status, hdr, _ := call(t, "GET", s.URL+"/Seed_Item-", ""); status != 302 || hdr.Get("Location") != "https://seed.example/p?q=1&r=2" {
		t.Errorf("seed item redirect: %d %q", status, hdr.Get("Location"))
	}

	// Custom slug taken → 409; delete → gone at once on this instance.
	if status, _, _ := call(t, "POST", s.URL+"/api/v1/links", `{"url":"https://x.example/","slug":"dyn-slug"}`); status != 201 {
		t.Fatalf("create slug: %d", status)
	}
	if status, _, body := call(t, "POST", s.URL+"/api/v1/links", `{"url":"https://y.example/","slug":"dyn-slug"}`); status != 409 || !strings.Contains(body, "slug_taken") {
		t.Errorf("slug taken: %d %q", status, body)
	}
	if status, _, _ := call(t, "GET", s.URL+"/dyn-slug", ""); status != 302 {
		t.Errorf("redirect before delete: %d", status)
	}
	if status, _, _ := call(t, "DELETE", s.URL+"/api/v1/links/dyn-slug", "", "X-API-Key", "k3y"); status != 204 {
		t.Errorf("delete: %d", status)
	}
	if status, _, _ := call(t, "GET", s.URL+"/dyn-slug", ""); status != 404 {
		t.Errorf("redirect after delete: %d, want 404 at once", status)
	}
	if status, _, body := call(t, "GET", s.URL+"/api/v1/links?limit=1", "", "X-API-Key", "k3y"); status != 200 || !strings.Contains(body, `"links"`) {
		t.Errorf("admin list: %d %q", status, body)
	}
	if status, _, _ := call(t, "GET", s.URL+"/readyz", ""); status != 200 {
		t.Errorf("readyz: %d", status)
	}
	_, _, metrics := call(t, "GET", s.URL+"/metrics", "")
	if strings.Contains(metrics, "linkgate_cache_hits_total 0") {
		t.Errorf("no cache hit counted:\n%s", grep(metrics, "linkgate_cache"))
	}
	for _, want := range []string{"linkgate_cache_hits_total", "linkgate_cache_misses_total", "linkgate_cache_entries",
		`linkgate_store_operation_duration_seconds_count{backend="dynamodb",op="create",result="ok"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grep(metrics, "linkgate_cache"))
		}
	}
}

func grep(text, substr string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func TestServeDynamoDBTableMissing(t *testing.T) {
	localAWSEnv(t)
	var out syncbuf.Buffer
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--store", "dynamodb:no-such-table"},
		func(string) string { return "" }, strings.NewReader(""), &out, &out)
	if code := cli.ExitCode(err); code != 1 {
		t.Errorf("serve over a missing table: exit %d, want 1", code)
	}
	for _, want := range []string{`"no-such-table" does not exist`, "linkgate dynamodb create-table --table no-such-table"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// DynamoDB not answering: the server starts anyway, /readyz and every
// request that needs the store answer 503 unavailable with Retry-After.
func TestServeDynamoDBUnreachable(t *testing.T) {
	localAWSEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // connections to it are refused
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", dead)
	s := startServe(t, nil, "--store", "dynamodb:whatever", "--store-timeout", "200ms")
	if !strings.Contains(s.logs.String(), "DynamoDB does not answer") {
		t.Errorf("no warning logged:\n%s", s.logs)
	}
	if status, hdr, body := call(t, "GET", s.URL+"/readyz", ""); status != 503 || hdr.Get("Retry-After") == "" {
		t.Errorf("readyz: %d %q %q", status, hdr.Get("Retry-After"), body)
	}
	for _, req := range [][2]string{{"GET", "/abcdefghij"}, {"GET", "/getFullURL/abcdefghij"}, {"POST", "/shortenURL"}} {
		body := ""
		if req[0] == "POST" {
			body = `{"OriginalURL":"https://x.example/"}`
		}
		status, hdr, got := call(t, req[0], s.URL+req[1], body, "Accept", "application/json")
		if status != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(got, "unavailable") {
			t.Errorf("%s %s: %d %q %q, want 503 unavailable with Retry-After", req[0], req[1], status, hdr.Get("Retry-After"), got)
		}
	}
}

// request sends method url through c with the headers hdr (name, value
// pairs; "Host" sets the Host) and returns the status and body.
func request(t *testing.T, c *http.Client, method, url, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hostRequest sends method path to base with Host host, as the admin
// (key adm), and returns the status and body.
func hostRequest(t *testing.T, base, method, path, host, body string) (int, string) {
	t.Helper()
	return request(t, noRedirects, method, base+path, body, "Host", host, "Authorization", "Bearer adm", "Content-Type", "application/json")
}

// TestServeRegistryDynamoDB: two instances on one table (DynamoDB
// Local) share the domain registry: a domain added through A is served by
// B within B's --domain-refresh, its links too; deleted through A, B
// answers its Host 421 again.
func TestServeRegistryDynamoDB(t *testing.T) {
	localAWSEnv(t)
	table := createTable(t)
	args := []string{"--store", "dynamodb:" + table, "--store-timeout", "10s", "--domain", "sho.test", "--admin-key", "adm", "--domain-refresh", "100ms"}
	a, b := startServe(t, nil, args...), startServe(t, nil, args...)
	if status, body := hostRequest(t, b.URL, "GET", "/x", "go.test", ""); status != http.StatusMisdirectedRequest {
		t.Fatalf("B before the add: %d %s", status, body)
	}
	if status, body := hostRequest(t, a.URL, "POST", "/api/v1/domains", "sho.test", `{"domain":"go.test"}`); status != http.StatusCreated {
		t.Fatalf("POST /api/v1/domains on A: %d %s", status, body)
	}
	if status, body := hostRequest(t, a.URL, "POST", "/api/v1/links", "go.test", `{"url":"https://example.com/shared","slug":"shared"}`); status != http.StatusCreated {
		t.Fatalf("create on go.test through A: %d %s", status, body)
	}
	eventually.True(t, 10*time.Second, "B to serve go.test", func() bool {
		status, _ := hostRequest(t, b.URL, "GET", "/shared", "go.test", "")
		return status == http.StatusFound
	})
	if status, body := hostRequest(t, b.URL, "GET", "/api/v1/domains", "sho.test", ""); status != http.StatusOK ||
		!strings.Contains(body, `{"domain":"go.test","base_url":"https://go.test","source":"api"`) {
		t.Errorf("GET /api/v1/domains on B: %d %s", status, body)
	}
	// Its link keeps it; then gone from both.
	if status, body := hostRequest(t, b.URL, "DELETE", "/api/v1/domains/go.test", "sho.test", ""); status != http.StatusConflict || !strings.Contains(body, `"links":1`) {
		t.Errorf("DELETE with a link: %d %s", status, body)
	}
	if status, body := hostRequest(t, b.URL, "DELETE", "/api/v1/links/shared?domain=go.test", "sho.test", ""); status != http.StatusNoContent {
		t.Fatalf("delete the link: %d %s", status, body)
	}
	if status, body := hostRequest(t, a.URL, "DELETE", "/api/v1/domains/go.test", "sho.test", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE /api/v1/domains/go.test on A: %d %s", status, body)
	}
	eventually.True(t, 10*time.Second, "B to refuse go.test", func() bool {
		status, _ := hostRequest(t, b.URL, "GET", "/shared", "go.test", "")
		return status == http.StatusMisdirectedRequest
	})
}
