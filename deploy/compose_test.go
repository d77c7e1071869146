package deploy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/linkgate/linkgate/internal/etcdtest"
	poll "github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testdep"
)

var composeFiles = []string{"compose/dynamodb.yaml", "compose/gateway-cluster.yaml"}

// composeEnv is the environment the compose files are interpolated with
// (the variables they require).
var composeEnv = map[string]string{"LINKGATE_ADMIN_KEY": "edd1c9f034335f136f87ad84b625c8f1"}

// Every compose file is valid against the Compose Specification's JSON
// schema (testdata/compose-spec.json, vendored).
func TestComposeSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	f, err := os.Open("testdata/compose-spec.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("compose_spec.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("compose_spec.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range composeFiles {
		raw := readYAML(t, file)
		js, err := json.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(js)))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("%s is not a valid Compose file: %v", file, err)
		}
	}
	// The schema catches what it should: a misspelt key fails.
	bad := map[string]any{"services": map[string]any{"serve": map[string]any{"image": "x", "comand": []any{"serve"}}}}
	js, _ := json.Marshal(bad)
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(js)))
	if schema.Validate(inst) == nil {
		t.Error("the schema accepts a service with a misspelt key")
	}
}

func readYAML(t *testing.T, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return doc
}

// composeService is what the loopback runs take of a service.
type composeService struct {
	Image       string
	Entrypoint  []string
	Command     []string
	Environment map[string]string
	DependsOn   []string
	Volumes     []string
	Restart     string
}

// loadCompose reads a compose file's services, interpolated with
// composeEnv as compose does.
func loadCompose(t *testing.T, file string) map[string]composeService {
	t.Helper()
	doc := readYAML(t, file)
	services := map[string]composeService{}
	for name, v := range doc["services"].(map[string]any) {
		m := v.(map[string]any)
		s := composeService{Environment: map[string]string{}}
		s.Image, _ = m["image"].(string)
		s.Restart, _ = m["restart"].(string)
		s.Entrypoint = stringList(t, m["entrypoint"])
		s.Command = stringList(t, m["command"])
		s.Volumes = stringList(t, m["volumes"])
		if env, ok := m["environment"].(map[string]any); ok {
			for k, v := range env {
				s.Environment[k] = interpolate(t, fmt.Sprint(v))
			}
		}
		switch d := m["depends_on"].(type) {
		case []any:
			s.DependsOn = stringList(t, d)
		case map[string]any:
			for k := range d {
				s.DependsOn = append(s.DependsOn, k)
			}
		}
		s.Image = interpolate(t, s.Image)
		for i := range s.Command {
			s.Command[i] = interpolate(t, s.Command[i])
		}
		services[name] = s
	}
	return services
}

func stringList(t *testing.T, v any) []string {
	t.Helper()
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return strings.Fields(v)
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			out[i] = fmt.Sprint(e)
		}
		return out
	}
	t.Fatalf("not a list: %v", v)
	return nil
}

var interpRE = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate expands ${VAR}, ${VAR:-default}, ${VAR:?error} and $$ as the
// Compose Specification says, from composeEnv.
func interpolate(t *testing.T, s string) string {
	t.Helper()
	return interpRE.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		g := interpRE.FindStringSubmatch(m)
		name := g[1] + g[4]
		v, set := composeEnv[name]
		switch g[2] {
		case ":-", "-":
			if !set || (g[2] == ":-" && v == "") {
				return g[3]
			}
		case ":?", "?":
			if !set || (g[2] == ":?" && v == "") {
				t.Fatalf("compose: %s: %s", name, g[3])
			}
		}
		return v
	})
}

// order returns the services in an order that starts each after what it
// depends on.
func order(t *testing.T, services map[string]composeService) []string {
	t.Helper()
	var out []string
	done := map[string]bool{}
	var visit func(string, int)
	visit = func(n string, depth int) {
		if done[n] {
			return
		}
		if depth > len(services) {
			t.Fatalf("depends_on cycle at %s", n)
		}
		deps := slices.Sorted(slices.Values(services[n].DependsOn))
		for _, d := range deps {
			if _, ok := services[d]; !ok {
				t.Fatalf("%s depends on unknown service %s", n, d)
			}
			visit(d, depth+1)
		}
		done[n] = true
		out = append(out, n)
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for k := range services {
			if !yield(k) {
				return
			}
		}
	}) {
		visit(n, 0)
	}
	return out
}

// loopback runs a compose topology as processes on 127.0.0.1: services on
// the linkgate image run this tree's binary with their command and
// environment, one-shot services run their command on this machine, and
// the others are stood in for by the test (real DynamoDB Local, etcd,
// redis-server). Host names in the files are rewritten to loopback
// addresses by rewrite.
type loopback struct {
	t        *testing.T
	services map[string]composeService
	rewrite  *strings.Replacer
	override map[string][]string // extra environment per service (listen addresses)
	procs    map[string]*proc
}

func isLinkgate(s composeService) bool { return strings.Contains(s.Image, "linkgate") }

func (l *loopback) env(name string) []string {
	s := l.services[name]
	var env []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range s.Environment {
			if !yield(k) {
				return
			}
		}
	}) {
		env = append(env, k+"="+l.rewrite.Replace(s.Environment[k]))
	}
	return append(env, l.override[name]...)
}

// run starts (or, for a one-shot service, runs to completion) a service
// that is not stood in for.
func (l *loopback) run(name string, oneShot bool, volumes map[string]string) {
	t := l.t
	s := l.services[name]
	argv := slices.Concat(s.Entrypoint, s.Command)
	for i := range argv {
		argv[i] = l.rewrite.Replace(argv[i])
		for in, host := range volumes {
			// The mount point where a path starts, not inside a URL.
			re := regexp.MustCompile(`(^|[\s"'=@])` + regexp.QuoteMeta(in))
			argv[i] = re.ReplaceAllString(argv[i], "${1}"+host)
		}
	}
	if isLinkgate(s) {
		argv = append([]string{linkgate(t)}, argv...)
	}
	if !oneShot {
		l.procs[name] = startEnv(t, l.env(name), argv[0], argv[1:]...)
		return
	}
	// restart: on-failure, as compose does for the one-shot services.
	for attempt := 1; ; attempt++ {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, l.env(name)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Logf("%s: %s", name, strings.TrimSpace(string(out)))
			return
		}
		if s.Restart != "on-failure" || attempt == 5 {
			t.Fatalf("one-shot service %s %q: %v\n%s", name, argv, err, out)
		}
		time.Sleep(time.Second) // deliberate: compose's restart: on-failure waits before running the service again
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// compose/dynamodb.yaml on loopback: DynamoDB Local (the test command's),
// create-table, then serve; a create and a redirect.
func TestComposeDynamoDBOnLoopback(t *testing.T) {
	endpoint := testdep.Env(t, testdep.DynamoDBEndpoint)
	services := loadCompose(t, "compose/dynamodb.yaml")
	table := fmt.Sprintf("goUrlShortener_compose_%d", time.Now().UnixNano())
	l := &loopback{t: t, services: services, procs: map[string]*proc{},
		rewrite:  strings.NewReplacer("http://dynamodb:8000", endpoint, "goUrlShortener", table),
		override: map[string][]string{"serve": {"LINKGATE_ADDR=127.0.0.1:0"}}}
	for _, name := range order(t, services) {
		switch s := services[name]; {
		case name == "dynamodb":
			// DynamoDB Local, started by the test command.
		case isLinkgate(s) && slices.Contains(s.Command, "create-table"):
			l.run(name, true, nil)
		case isLinkgate(s):
			l.run(name, false, nil)
		default:
			t.Fatalf("service %s (%s) has no stand-in in this test", name, s.Image)
		}
	}
	serve := l.procs["serve"]
	if serve == nil {
		t.Fatal("no serve service")
	}
	// As the compose healthcheck does: traffic once /readyz reaches the table.
	eventually(t, serve.url+"/readyz", http.StatusOK)
	id := shorten(t, serve.url, "https://aws.amazon.com/ec2/graviton/")
	do(t, "GET", serve.url+"/"+id, "", http.StatusFound)
	serve.stop(t)
}

var promRE = regexp.MustCompile(`prometheus=(\S+)`)

// compose/gateway-cluster.yaml on loopback: etcd (embedded), redis-server,
// an upstream standing in for httpbin, both gateways, then the routes
// one-shot's own script (curl, sh). A route applied through gateway-1 is
// served by both, and limit-count's counter is shared through Redis.
func TestComposeGatewayClusterOnLoopback(t *testing.T) {
	redisServer := testdep.Binary(t, testdep.RedisServer, "redis-server")
	testdep.Binary(t, "LINKGATE_TEST_CURL", "curl")
	services := loadCompose(t, "compose/gateway-cluster.yaml")

	etcd := etcdtest.Start(t)
	redisPort := freePort(t)
	redis := exec.Command(redisServer, "--bind", "127.0.0.1", "--port", strconv.Itoa(redisPort), "--save", "", "--appendonly", "no")
	if err := redis.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redis.Process.Kill(); redis.Wait() })
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"url":%q}`, r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	upAddr := strings.TrimPrefix(upstream.URL, "http://")

	l := &loopback{t: t, services: services, procs: map[string]*proc{}, override: map[string][]string{}}
	l.rewrite = strings.NewReplacer("etcd:2379", etcd.Endpoint(), "172.28.0.0/16", "127.0.0.0/8")
	var gateways []string
	for _, name := range order(t, services) {
		s := services[name]
		switch {
		case name == "etcd", name == "redis", name == "httpbin":
			// stood in for above
		case isLinkgate(s):
			l.override[name] = []string{"LINKGATE_LISTEN=127.0.0.1:0", "LINKGATE_LISTEN_TLS=127.0.0.1:0", "LINKGATE_PROMETHEUS_LISTEN=127.0.0.1:0"}
			l.run(name, false, nil)
			gateways = append(gateways, name)
		case name == "routes":
			// Its volume, with the routes' host names rewritten to loopback.
			routes := filepath.Join(t.TempDir(), "routes")
			src, dst, _ := strings.Cut(strings.TrimSuffix(s.Volumes[0], ":ro"), ":")
			copyRewritten(t, filepath.Join("compose", src), routes, strings.NewReplacer(
				"httpbin:8080", upAddr, `"redis_host": "redis"`, `"redis_host": "127.0.0.1"`,
				`"redis_port": 6379`, fmt.Sprintf(`"redis_port": %d`, redisPort)))
			var pairs []string
			for _, g := range gateways {
				pairs = append(pairs, g+":9080", strings.TrimPrefix(l.procs[g].url, "http://"))
			}
			pairs = append(pairs, "etcd:2379", etcd.Endpoint(), "172.28.0.0/16", "127.0.0.0/8")
			l.rewrite = strings.NewReplacer(pairs...)
			l.run(name, true, map[string]string{dst: routes})
		default:
			t.Fatalf("service %s (%s) has no stand-in in this test", name, s.Image)
		}
	}
	if len(gateways) != 2 {
		t.Fatalf("gateways %v, want two", gateways)
	}
	// Both nodes serve both routes (gateway-2 got them from etcd). Each
	// route reaches a node's router on its own watch event, so wait for
	// both on both nodes before counting.
	for _, g := range gateways {
		eventually(t, l.procs[g].url+"/anything/das", http.StatusOK)
		eventually(t, l.procs[g].url+"/hello", http.StatusOK)
	}
	remaining := -1
	for i := range 4 {
		g := l.procs[gateways[i%2]]
		body := eventually(t, g.url+"/anything/das", http.StatusOK)
		if !strings.Contains(body, "/anything/das") {
			t.Errorf("%s /anything/das: %s", gateways[i%2], body)
		}
		resp, err := noRedirect.Get(g.url + "/hello")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		n, err := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("%s /hello: %d, X-RateLimit-Remaining %q", gateways[i%2], resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
		}
		if remaining >= 0 && n != remaining-1 {
			t.Errorf("%s /hello: remaining %d after %d on the other node: the counter is not shared", gateways[i%2], n, remaining)
		}
		remaining = n
	}
	for _, g := range gateways {
		m := promRE.FindStringSubmatch(l.procs[g].logs.String())
		if m == nil {
			t.Fatalf("%s: no prometheus address in its log", g)
		}
		if body := get(t, "http://"+m[1]+"/apisix/prometheus/metrics", http.StatusOK); !strings.Contains(body, "apisix_http_status") {
			t.Errorf("%s metrics have no apisix_http_status", g)
		}
		l.procs[g].stop(t)
	}
}

// eventually GETs url until it answers want (a route reaches a node within
// a second), bounded.
func eventually(t *testing.T, url string, want int) string {
	t.Helper()
	var body string
	poll.True(t, 10*time.Second, fmt.Sprintf("GET %s to answer %d", url, want), func() bool {
		resp, err := noRedirect.Get(url)
		if err != nil {
			return false
		}
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		resp.Body.Close()
		body = string(b[:n])
		return resp.StatusCode == want
	})
	return body
}

// copyRewritten copies the files of src into dst through r.
func copyRewritten(t *testing.T, src, dst string, r *strings.Replacer) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), []byte(r.Replace(string(data))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
