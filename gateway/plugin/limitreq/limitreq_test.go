package limitreq

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
	"github.com/linkgate/linkgate/internal/testdep"
)

// clock is an injected clock; sleeping advances it, as a real delay would.
type clock struct {
	mu    sync.Mutex
	t     time.Time
	slept []time.Duration
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
func (c *clock) sleep(d time.Duration) {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.mu.Unlock()
}

func newFactory(pool *redis.Pool) (*Factory, *clock) {
	clk := &clock{t: time.Unix(1700000000, 0)}
	f := New(slog.New(slog.DiscardHandler), pool)
	f.now, f.sleep = clk.now, clk.sleep
	return f, clk
}

func TestLeak(t *testing.T) {
	for _, tc := range []struct {
		excess  float64
		elapsed time.Duration
		rate    float64
		burst   float64
		want    float64
		ok      bool
	}{
		{0, 0, 1, 0, 1, false},
		{0, time.Second, 1, 0, 0, true},
		{1, 500 * time.Millisecond, 1, 1, 1.5, false},
		{1, 500 * time.Millisecond, 1, 2, 1.5, true},
		{3, 10 * time.Second, 4, 2, 0, true},
		{3, 500 * time.Millisecond, 4, 2, 2, true},
		{2, -500 * time.Millisecond, 4, 2, 1, true}, // a clock going back counts as elapsed, as resty
	} {
		got, ok := Leak(tc.excess, tc.elapsed, tc.rate, tc.burst)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Leak(%v, %v, %v, %v) = %v %v, want %v %v", tc.excess, tc.elapsed, tc.rate, tc.burst, got, ok, tc.want, tc.ok)
		}
	}
}

// statuses runs requests at the given offsets (each one after the last)
// and returns their statuses and the delays asked for.
func statuses(t *testing.T, f *Factory, clk *clock, conf string, gaps []time.Duration, vars map[string]string) (string, []time.Duration) {
	t.Helper()
	in := plugintest.New(t, f, conf).(gateway.Accessor)
	var got []string
	for _, g := range gaps {
		clk.advance(g)
		rep := in.Access(plugintest.NewCtx(vars))
		if rep.Status == 0 {
			rep.Status = 200
		}
		got = append(got, fmt.Sprint(rep.Status))
	}
	return strings.Join(got, " "), clk.slept
}

func TestLocal(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name, conf string
		gaps       []time.Duration
		want       string
		delays     []time.Duration
	}{
		// limit-req.t TEST 5-6: rate 4 burst 2: 1 + 2 queued, the rest rejected.
		{"burst", `{"rate":4,"burst":2,"rejected_code":503,"key":"remote_addr"}`, []time.Duration{0, 0, 0, 0, 0},
			"200 200 200 503 503", []time.Duration{250 * ms, 500 * ms}},
		{"nodelay", `{"rate":4,"burst":2,"key":"remote_addr","nodelay":true}`, []time.Duration{0, 0, 0, 0},
			"200 200 200 503", nil},
		{"drains at the rate", `{"rate":1,"burst":0,"key":"remote_addr"}`, []time.Duration{0, 999 * ms, ms, 500 * ms, 500 * ms},
			"200 503 200 503 200", nil},
		{"rejected_code", `{"rate":1,"burst":0,"key":"remote_addr","rejected_code":429}`, []time.Duration{0, 0}, "200 429", nil},
		{"fractional rate", `{"rate":0.5,"burst":0,"key":"remote_addr"}`, []time.Duration{0, 1900 * ms, 100 * ms}, "200 503 200", nil},
	} {
		f, clk := newFactory(nil)
		got, delays := statuses(t, f, clk, tc.conf, tc.gaps, nil)
		if got != tc.want || fmt.Sprint(delays) != fmt.Sprint(tc.delays) {
			t.Errorf("%s: %s delays %v, want %s %v", tc.name, got, delays, tc.want, tc.delays)
		}
	}
}

func TestKeys(t *testing.T) {
	f, _ := newFactory(nil)
	in := plugintest.New(t, f, `{"rate":1,"burst":0,"key":"http_x_user","rejected_msg":"too many"}`).(gateway.Accessor)
	for _, tc := range []struct {
		user   string
		status int
	}{{"a", 0}, {"b", 0}, {"a", 503}, {"", 0}, {"", 503}} {
		rep := in.Access(plugintest.NewCtx(map[string]string{"http_x_user": tc.user}))
		if rep.Status != tc.status {
			t.Errorf("user %q: %d, want %d", tc.user, rep.Status, tc.status)
		}
		if rep.Status != 0 && string(rep.Body) != `{"error_msg":"too many"}`+"\n" {
			t.Errorf("body %q", rep.Body)
		}
	}
	// Another instance (another route) counts apart; the same configuration
	// on the same resource after a reload shares the bucket.
	other := plugintest.New(t, f, `{"rate":1,"burst":0,"key":"http_x_user"}`).(gateway.Accessor)
	if rep := other.Access(plugintest.NewCtx(map[string]string{"http_x_user": "a"})); rep.Status != 0 {
		t.Errorf("another configuration shares a bucket: %d", rep.Status)
	}
	again := plugintest.New(t, f, `{"rate":1,"burst":0,"key":"http_x_user","rejected_msg":"too many"}`).(gateway.Accessor)
	if rep := again.Access(plugintest.NewCtx(map[string]string{"http_x_user": "a"})); rep.Status != 503 {
		t.Errorf("a reload forgot the bucket: %d", rep.Status)
	}
}

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin limit-req err: "
	for conf, want := range map[string]string{
		`{"rate":1,"burst":0,"key":"remote_addr"}`:                                           "",
		`{"burst":0,"key":"remote_addr"}`:                                                    pre + `property "rate" is required`,
		`{"rate":0,"burst":0,"key":"remote_addr"}`:                                           pre + `property "rate" validation failed: expected 0 to be greater than 0`,
		`{"rate":1,"burst":-1,"key":"remote_addr"}`:                                          pre + `property "burst" validation failed: expected -1 to be at least 0`,
		`{"rate":1,"burst":0,"key":"remote_addr","policy":"redis"}`:                          pre + "then clause did not match",
		`{"rate":1,"burst":0,"key":"remote_addr","policy":"redis","redis_host":"127.0.0.1"}`: "",
	} {
		if got := plugintest.Check(t, New(nil, nil), conf, false); got != want {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

// Two gateway nodes (two factories) on one real redis-server share the
// bucket: between them exactly 1 + burst requests pass at once, and the
// bucket drains on redis's (here injected) clock.
func TestRedisTwoNodes(t *testing.T) {
	addr := testdep.Env(t, testdep.RedisAddr)
	host, port, _ := strings.Cut(addr, ":")
	pool := redis.NewPool()
	defer pool.Close()
	key := fmt.Sprint("k", time.Now().UnixNano())
	conf := `{"rate":2,"burst":3,"key":"http_x_key","nodelay":true,"policy":"redis","redis_host":"` + host + `","redis_port":` + port + `}`
	clk := &clock{t: time.Unix(1700000000, 0)}
	var nodes []gateway.Accessor
	for range 2 {
		f, _ := newFactory(pool)
		f.redisNow = clk.now
		nodes = append(nodes, plugintest.New(t, f, conf).(gateway.Accessor))
	}
	var mu sync.Mutex
	passed := 0
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			rep := nodes[i%2].Access(plugintest.NewCtx(map[string]string{"http_x_key": key}))
			if rep.Status == 500 {
				t.Error("redis failed")
			}
			if rep.Status == 0 {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if passed != 4 {
		t.Errorf("%d of 20 passed on two nodes, want 1 + burst 3", passed)
	}
	// Half a second drains one request at rate 2.
	clk.advance(500 * time.Millisecond)
	got := ""
	for i := range 3 {
		rep := nodes[i%2].Access(plugintest.NewCtx(map[string]string{"http_x_key": key}))
		got += fmt.Sprint(rep.Status, " ")
	}
	if got != "0 503 503 " {
		t.Errorf("after 500ms: %s", got)
	}
}

func TestRedisDown(t *testing.T) {
	pool := redis.NewPool()
	defer pool.Close()
	for conf, want := range map[string]int{
		`{"rate":1,"burst":0,"key":"remote_addr","policy":"redis","redis_host":"127.0.0.1","redis_port":1,"redis_timeout":100}`:                          500,
		`{"rate":1,"burst":0,"key":"remote_addr","policy":"redis","redis_host":"127.0.0.1","redis_port":1,"redis_timeout":100,"allow_degradation":true}`: 0,
	} {
		f, _ := newFactory(pool)
		if rep := plugintest.New(t, f, conf).(gateway.Accessor).Access(plugintest.NewCtx(nil)); rep.Status != want {
			t.Errorf("%s: %d, want %d", conf, rep.Status, want)
		}
	}
}

func BenchmarkAccess(b *testing.B) {
	f, _ := newFactory(nil)
	f.now = time.Now
	in := plugintest.New(b, f, `{"rate":1e12,"burst":1e12,"key":"remote_addr","nodelay":true}`).(gateway.Accessor)
	c := plugintest.NewCtx(nil)
	b.ReportAllocs()
	for b.Loop() {
		if in.Access(c).Status != 0 {
			b.Fatal("rejected")
		}
	}
}
