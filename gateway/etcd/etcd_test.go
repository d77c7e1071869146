package etcd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/etcd"
	"github.com/linkgate/linkgate/gateway/storetest"
	"github.com/linkgate/linkgate/internal/etcdtest"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testcert"
)

func open(t *testing.T, endpoint, prefix string) *etcd.Store {
	t.Helper()
	cfg, err := etcd.ParseURL("etcd://" + endpoint + "?prefix=" + prefix)
	if err != nil {
		t.Fatal(err)
	}
	s, err := etcd.Open(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	srv := etcdtest.Start(t)
	n := 0
	storetest.Run(t, func(t *testing.T) gateway.Store {
		n++
		return open(t, srv.Endpoint(), fmt.Sprintf("/t%d", n))
	})
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		in        string
		endpoints []string
		prefix    string
		bad       bool
	}{
		{"etcd://127.0.0.1:2379", []string{"http://127.0.0.1:2379"}, "/apisix", false},
		{"etcd://a:1,b:2?prefix=/gw/", []string{"http://a:1", "http://b:2"}, "/gw", false},
		{"etcd://a:1?prefix=gw", nil, "", true},
		{"http://a:1", nil, "", true},
		{"etcd://", nil, "", true},
	}
	for _, tt := range tests {
		c, err := etcd.ParseURL(tt.in)
		if (err != nil) != tt.bad {
			t.Errorf("%s: err %v", tt.in, err)
			continue
		}
		if !tt.bad && (fmt.Sprint(c.Endpoints) != fmt.Sprint(tt.endpoints) || c.Prefix != tt.prefix) {
			t.Errorf("%s: %+v", tt.in, c)
		}
	}
}

func rawClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// What APISIX writes loads: its init_dir placeholders and resources linkgate
// does not serve are skipped.
func TestAPISIXLayout(t *testing.T) {
	srv := etcdtest.Start(t)
	c := rawClient(t, srv.Endpoint())
	ctx := t.Context()
	// An ssl object as APISIX 2.14 writes it: the key encrypted with the
	// default key_encrypt_salt.
	ca := testcert.NewCA(t, "etcd test CA")
	pair := ca.Issue(t, testcert.Options{DNS: []string{"test.com"}})
	kc, _ := gateway.NewKeyCipher(gateway.DefaultKeySalt)
	sslValue, _ := json.Marshal(map[string]any{"cert": pair.CertPEM, "key": kc.Encrypt(pair.KeyPEM), "sni": "test.com"})
	for k, v := range map[string]string{
		"/apisix/routes/":    "init_dir",
		"/apisix/upstreams/": "init_dir",
		"/apisix/ssl/":       "init_dir",
		"/apisix/routes/1":   `{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`,
		"/apisix/ssl/1":      string(sslValue),
		"/apisix/ssl/2":      `{"cert":"x"}`,
		"/apisix/plugins":    `[{"name":"limit-count"}]`,
	} {
		if _, err := c.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, srv.Endpoint(), "/apisix")
	list, err := s.List(ctx, gateway.KindRoute)
	if err != nil || len(list) != 1 || list[0].ID != "1" {
		t.Fatalf("List: %+v %v", list, err)
	}
	u := firstUpdate(t, s)
	if len(u.Entries) != 3 {
		t.Fatalf("Watch reset: %+v", u.Entries)
	}
	cfg := gateway.NewConfig()
	reg := gateway.NewRegistryWithKeys(kc)
	errs := cfg.Apply(u, reg)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "ssl/2: invalid configuration") {
		t.Fatalf("want only ssl/2 skipped: %v", errs)
	}
	if len(cfg.Routes) != 1 || len(cfg.SSLs) != 1 {
		t.Errorf("loaded %d routes, %d ssl objects; want 1 and 1", len(cfg.Routes), len(cfg.SSLs))
	}
	compiled, _ := gateway.Compile(cfg, reg)
	if len(compiled.SSLs) != 1 || compiled.SSLs[0].SNIs[0] != "test.com" {
		t.Errorf("compiled ssl: %+v", compiled.SSLs)
	}
}

func firstUpdate(t *testing.T, s *etcd.Store) gateway.Update {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := make(chan gateway.Update, 1)
	go func() {
		_ = s.Watch(ctx, func(u gateway.Update) {
			select {
			case ch <- u:
			default:
			}
			cancel()
		})
	}()
	select {
	case u := <-ch:
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update")
	}
	return gateway.Update{}
}

// A watcher that falls behind a compaction lists again and gets the latest
// state.
func TestCompactionResync(t *testing.T) {
	srv := etcdtest.Start(t)
	c := rawClient(t, srv.Endpoint())
	s := open(t, srv.Endpoint(), "/apisix")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := c.Put(ctx, "/apisix/routes/1", `{"v":0}`); err != nil {
		t.Fatal(err)
	}
	release, held := make(chan struct{}), make(chan struct{})
	updates := make(chan gateway.Update, 16)
	var once sync.Once
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.Watch(ctx, func(u gateway.Update) {
			once.Do(func() { close(held); <-release }) // hold the first reset while history is compacted
			updates <- u
		})
	}()
	defer func() { cancel(); wg.Wait() }()
	select {
	case <-held: // the watcher has listed and is held at its first reset
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher's first reset never came")
	}
	var last int64
	for i := 1; i <= 5; i++ {
		r, err := c.Put(ctx, "/apisix/routes/1", fmt.Sprintf(`{"v":%d}`, i))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Header.Revision
	}
	if _, err := c.Put(ctx, "/apisix/routes/2", `{"v":"new"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	close(release)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case u := <-updates:
			if !u.Reset {
				continue
			}
			vals := map[string]string{}
			for _, e := range u.Entries {
				vals[e.ID] = string(e.Value)
			}
			if vals["1"] == `{"v":5}` && vals["2"] == `{"v":"new"}` {
				return // re-listed after the compaction
			}
		case <-deadline:
			t.Fatal("no resync after compaction")
		}
	}
}

// With etcd stopped the store reports it unreachable; after a restart the
// watch resumes and delivers changes made meanwhile.
func TestOutageAndRecovery(t *testing.T) {
	t.Parallel() // stopping embedded etcd waits out its graceful shutdown (~10 s)
	srv := etcdtest.Start(t)
	s := open(t, srv.Endpoint(), "/apisix")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	updates := make(chan gateway.Update, 64)
	go func() { _ = s.Watch(ctx, func(u gateway.Update) { updates <- u }) }()
	<-updates
	eventually.True(t, 5*time.Second, "reachable", s.Reachable)
	srv.Stop()
	eventually.True(t, 5*time.Second, "unreachable", func() bool { return !s.Reachable() })
	if _, err := s.Get(ctx, gateway.KindRoute, "1"); err == nil {
		t.Error("Get succeeded with etcd down")
	}
	srv.Restart()
	c := rawClient(t, srv.Endpoint())
	if _, err := c.Put(ctx, "/apisix/routes/9", `{"uri":"/after"}`); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(15 * time.Second)
	for {
		select {
		case u := <-updates:
			for _, e := range u.Entries {
				if e.ID == "9" {
					eventually.True(t, 5*time.Second, "reachable again", s.Reachable)
					return
				}
			}
		case <-deadline:
			t.Fatal("change after restart not delivered")
		}
	}
}

// TestTLS: etcds:// with a CA and a client certificate reaches an etcd
// that requires client certificates (--client-cert-auth); without the
// certificate, with another CA, or in cleartext it does not.
func TestTLS(t *testing.T) {
	ca := testcert.NewCA(t, "etcd test CA")
	srvDir, cliDir := t.TempDir(), t.TempDir()
	caFile, certFile, keyFile := testcert.WriteFiles(t, srvDir, ca,
		ca.Issue(t, testcert.Options{DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}))
	_, cliCert, cliKey := testcert.WriteFiles(t, cliDir, ca, ca.Issue(t, testcert.Options{DNS: []string{"gateway"}, Client: true}))
	other := testcert.NewCA(t, "another CA")
	otherCA, _, _ := testcert.WriteFiles(t, t.TempDir(), other, other.Issue(t, testcert.Options{DNS: []string{"x"}}))
	srv := etcdtest.StartTLS(t, certFile, keyFile, caFile)

	try := func(url string) error {
		cfg, err := etcd.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Timeout = 2 * time.Second
		s, err := etcd.Open(t.Context(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, _, err := s.Put(t.Context(), gateway.KindRoute, "1", []byte(`{"uri":"/tls"}`), 0); err != nil {
			return err
		}
		e, err := s.Get(t.Context(), gateway.KindRoute, "1")
		if err == nil && !strings.Contains(string(e.Value), "/tls") {
			err = fmt.Errorf("read back %s", e.Value)
		}
		return err
	}
	base := "etcds://" + srv.Endpoint() + "?prefix=/tls&ca=" + caFile
	if err := try(base + "&cert=" + cliCert + "&key=" + cliKey); err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	for name, url := range map[string]string{
		"no client certificate": base,
		"another CA":            "etcds://" + srv.Endpoint() + "?ca=" + otherCA + "&cert=" + cliCert + "&key=" + cliKey,
		"cleartext":             "etcd://" + srv.Endpoint(),
	} {
		if err := try(url); err == nil {
			t.Errorf("%s: the write succeeded", name)
		}
	}
}

// TestParseURLSecrets: TLS files must exist and go together; the password
// may come from a file.
func TestParseURLSecrets(t *testing.T) {
	dir := t.TempDir()
	pw := dir + "/pw"
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)
	c, err := etcd.ParseURL("etcd://root@127.0.0.1:2379?password_file=" + pw)
	if err != nil || c.Username != "root" || c.Password != "s3cret" {
		t.Errorf("password_file: %+v %v", c, err)
	}
	for _, bad := range []string{
		"etcd://127.0.0.1:2379?ca=/x",                // TLS options need etcds
		"etcds://127.0.0.1:2379?ca=" + dir + "/none", // missing file
		"etcds://127.0.0.1:2379?cert=" + pw,          // cert without key
		"etcd://127.0.0.1:2379?password_file=/nonexistent",
	} {
		if _, err := etcd.ParseURL(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	if c, err := etcd.ParseURL("etcds://a:1,b:2"); err != nil || c.TLS == nil || c.Endpoints[1] != "https://b:2" {
		t.Errorf("etcds without files (system CAs): %+v %v", c, err)
	}
}
