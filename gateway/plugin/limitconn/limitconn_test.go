package limitconn

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
	"github.com/linkgate/linkgate/internal/testdep"
)

type plugin interface {
	gateway.Accessor
	gateway.Logger
}

func newFactory(pool *redis.Pool) (*Factory, *[]time.Duration) {
	var mu sync.Mutex
	var slept []time.Duration
	f := New(slog.New(slog.DiscardHandler), pool)
	f.sleep = func(d time.Duration) { mu.Lock(); slept = append(slept, d); mu.Unlock() }
	return f, &slept
}

func TestLocal(t *testing.T) {
	f, slept := newFactory(nil)
	in := plugintest.New(t, f, `{"conn":1,"burst":2,"default_conn_delay":0.5,"key":"remote_addr","rejected_code":429}`).(plugin)
	// Four requests in flight: 1 admitted, 2 delayed by 0.5 and 1 s, 1 rejected.
	var open []*plugintest.Ctx
	var got []string
	for range 4 {
		c := plugintest.NewCtx(nil)
		rep := in.Access(c)
		got = append(got, fmt.Sprint(rep.Status))
		if rep.Status == 0 {
			open = append(open, c)
		} else {
			in.Log(c, &gateway.LogEntry{}) // a rejected request is not counted out
		}
	}
	if strings.Join(got, " ") != "0 0 0 429" || fmt.Sprint(*slept) != "[500ms 1s]" {
		t.Fatalf("statuses %v, delays %v", got, *slept)
	}
	// Counting out: the latency (here 100 ms upstream) moves the unit delay halfway.
	in.Log(open[0], &gateway.LogEntry{UpstreamTime: 100 * time.Millisecond, RequestTime: 600 * time.Millisecond})
	if u := in.(*instance).unitDelay.Load(); fmt.Sprintf("%.2f", math.Float64frombits(u)) != "0.30" {
		t.Errorf("unit delay %v, want (0.1+0.5)/2", math.Float64frombits(u))
	}
	*slept = nil
	c := plugintest.NewCtx(nil)
	if rep := in.Access(c); rep.Status != 0 || fmt.Sprint(*slept) != "[600ms]" {
		t.Errorf("after one left: %d delays %v, want the third place (2 × 0.3 s)", rep.Status, *slept)
	}
	for _, c := range append(open[1:], c) {
		in.Log(c, &gateway.LogEntry{RequestTime: time.Second}) // not proxied: request time minus the delay
	}
	n := int64(-1)
	f.local.Update(string(in.(*instance).Key.Append(nil, plugintest.NewCtx(nil))), 0, func(ct *count, _ bool) bool { n = ct.n; return true })
	if n != 0 || f.local.Len() != 1 {
		t.Errorf("count %d in %d keys after every request left, want 0 in 1", n, f.local.Len())
	}
}

func TestOnlyDefaultDelay(t *testing.T) {
	f, slept := newFactory(nil)
	in := plugintest.New(t, f, `{"conn":2,"burst":1,"default_conn_delay":0.2,"only_use_default_delay":true,"key":"http_x_k"}`).(plugin)
	cs := []*plugintest.Ctx{}
	for range 3 {
		c := plugintest.NewCtx(map[string]string{"http_x_k": "a"})
		if rep := in.Access(c); rep.Status != 0 {
			t.Fatalf("%d", rep.Status)
		}
		cs = append(cs, c)
	}
	in.Log(cs[0], &gateway.LogEntry{UpstreamTime: 5 * time.Second})
	in.Access(plugintest.NewCtx(map[string]string{"http_x_k": "a"}))
	if fmt.Sprint(*slept) != "[200ms 200ms]" {
		t.Errorf("delays %v", *slept)
	}
	// Other keys count apart.
	if rep := in.Access(plugintest.NewCtx(map[string]string{"http_x_k": "b"})); rep.Status != 0 {
		t.Errorf("key b: %d", rep.Status)
	}
}

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin limit-conn err: "
	for conf, want := range map[string]string{
		`{"conn":1,"burst":0,"default_conn_delay":0.1,"key":"remote_addr"}`:                                                        "",
		`{"conn":0,"burst":0,"default_conn_delay":0.1,"key":"remote_addr"}`:                                                        pre + `property "conn" validation failed: expected 0 to be greater than 0`,
		`{"conn":1,"burst":0,"key":"remote_addr"}`:                                                                                 pre + `property "default_conn_delay" is required`,
		`{"conn":1,"burst":0,"default_conn_delay":0.1,"key":"remote_addr","policy":"redis-cluster","redis_cluster_nodes":["a:1"]}`: pre + "else clause did not match",
	} {
		if got := plugintest.Check(t, New(nil, nil), conf, false); got != want {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

// Two gateway nodes on one real redis-server: conn + burst requests in
// flight between them, not per node; each one leaving frees a place.
func TestRedisTwoNodes(t *testing.T) {
	addr := testdep.Env(t, testdep.RedisAddr)
	host, port, _ := strings.Cut(addr, ":")
	pool := redis.NewPool()
	defer pool.Close()
	key := fmt.Sprint("k", time.Now().UnixNano())
	conf := `{"conn":2,"burst":1,"default_conn_delay":0.001,"only_use_default_delay":true,"key":"http_x_key","policy":"redis","redis_host":"` + host + `","redis_port":` + port + `}`
	var nodes []plugin
	for range 2 {
		f, _ := newFactory(pool)
		nodes = append(nodes, plugintest.New(t, f, conf).(plugin))
	}
	type req struct {
		node int
		c    *plugintest.Ctx
	}
	var mu sync.Mutex
	var open []req
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			c := plugintest.NewCtx(map[string]string{"http_x_key": key})
			rep := nodes[i%2].Access(c)
			if rep.Status == 500 {
				t.Error("redis failed")
			}
			if rep.Status == 0 {
				mu.Lock()
				open = append(open, req{i % 2, c})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(open) != 3 {
		t.Fatalf("%d of 12 in flight on two nodes, want conn 2 + burst 1", len(open))
	}
	// One leaves on its node: a place frees on the other.
	first := open[0]
	nodes[first.node].Log(first.c, &gateway.LogEntry{})
	other := 1 - first.node
	c := plugintest.NewCtx(map[string]string{"http_x_key": key})
	if rep := nodes[other].Access(c); rep.Status != 0 {
		t.Errorf("after one left on node %d, node %d refused: %d", first.node, other, rep.Status)
	}
	if rep := nodes[first.node].Access(plugintest.NewCtx(map[string]string{"http_x_key": key})); rep.Status != 503 {
		t.Errorf("over the shared limit: %d", rep.Status)
	}
	for _, r := range append(open[1:], req{other, c}) {
		nodes[r.node].Log(r.c, &gateway.LogEntry{})
	}
}

func BenchmarkAccessLog(b *testing.B) {
	f, _ := newFactory(nil)
	in := plugintest.New(b, f, `{"conn":1000,"burst":0,"default_conn_delay":0.1,"key":"remote_addr"}`).(plugin)
	c := plugintest.NewCtx(nil)
	e := &gateway.LogEntry{UpstreamTime: time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		if in.Access(c).Status != 0 {
			b.Fatal("rejected")
		}
		in.Log(c, e)
	}
}
