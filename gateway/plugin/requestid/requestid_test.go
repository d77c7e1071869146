package requestid

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

var (
	uuidRe   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	uuid7Re  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	nanoidRe = regexp.MustCompile(`^[A-Za-z0-9_-]{21}$`)
	digitsRe = regexp.MustCompile(`^[0-9]+$`)
)

func TestIDs(t *testing.T) {
	for _, tc := range []struct {
		conf, header string
		re           *regexp.Regexp
	}{
		{`{}`, "X-Request-Id", uuidRe},
		{`{"header_name":"Custom-Header-Name"}`, "Custom-Header-Name", uuidRe},
		{`{"algorithm":"nanoid"}`, "X-Request-Id", nanoidRe},
		{`{"algorithm":"snowflake"}`, "X-Request-Id", digitsRe},
		{`{"algorithm":"uuidv7"}`, "X-Request-Id", uuid7Re},
	} {
		in := plugintest.New(t, New(7), tc.conf)
		seen := map[string]bool{}
		for range 1000 {
			c := plugintest.NewCtx(nil)
			in.(gateway.Rewriter).Rewrite(c)
			in.(gateway.HeaderFilter).FilterHeaders(c)
			up, resp := c.Var("http_"+lower(tc.header)), c.ResponseHeader(tc.header)
			if !tc.re.MatchString(up) || resp != up {
				t.Fatalf("%s: upstream %q, response %q", tc.conf, up, resp)
			}
			if seen[up] {
				t.Fatalf("%s: %q twice", tc.conf, up)
			}
			seen[up] = true
		}
	}
}

func lower(h string) string {
	b := []byte(h)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func TestKeepsGivenIDs(t *testing.T) {
	in := plugintest.New(t, New(0), `{}`)
	// The client's id goes upstream and back.
	c := plugintest.NewCtx(map[string]string{"http_x_request_id": "123"})
	in.(gateway.Rewriter).Rewrite(c)
	in.(gateway.HeaderFilter).FilterHeaders(c)
	if len(c.UpstreamHeaders) != 0 || c.ResponseHeader("X-Request-Id") != "123" {
		t.Errorf("client id: upstream %v, response %q", c.UpstreamHeaders, c.ResponseHeader("X-Request-Id"))
	}
	// The upstream's own id in the response wins.
	c = plugintest.NewCtx(nil)
	in.(gateway.Rewriter).Rewrite(c)
	c.SetResponseHeader("X-Request-Id", "from-upstream")
	in.(gateway.HeaderFilter).FilterHeaders(c)
	if got := c.ResponseHeaderValues("X-Request-Id"); len(got) != 1 || got[0] != "from-upstream" {
		t.Errorf("upstream id: %v", got)
	}
	// include_in_response false: nothing for the response phase.
	if _, ok := plugintest.New(t, New(0), `{"include_in_response":false}`).(gateway.HeaderFilter); ok {
		t.Error("include_in_response false still filters headers")
	}
}

func TestSchema(t *testing.T) {
	got := plugintest.Check(t, New(0), `{"algorithm":"bad_algorithm"}`, false)
	if want := `failed to check the configuration of plugin request-id err: property "algorithm" validation failed: match`; len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("%q", got)
	}
}

// TestUUIDv7Time: a UUIDv7's first 48 bits are the clock's Unix
// milliseconds (3.x t/plugin/request-id.t TEST 20's format).
func TestUUIDv7Time(t *testing.T) {
	f := New(0)
	f.now = func() time.Time { return time.UnixMilli(0x0123456789ab) }
	c := plugintest.NewCtx(nil)
	plugintest.New(t, f, `{"algorithm":"uuidv7","include_in_response":false}`).(gateway.Rewriter).Rewrite(c)
	if id := c.Var("http_x_request_id"); !uuid7Re.MatchString(id) || !strings.HasPrefix(id, "01234567-89ab-7") {
		t.Errorf("%q: want 01234567-89ab-7…", id)
	}
}

// Snowflake ids are unique and increasing across goroutines, carry the
// machine id, and borrow the next millisecond past 1024 ids in one.
func TestSnowflake(t *testing.T) {
	f := New(0xabc)
	now := time.UnixMilli(snowflakeEpoch + 5000)
	f.now = func() time.Time { return now }
	var mu sync.Mutex
	ids := map[uint64]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var last uint64
			for range 1000 {
				id := f.snowflake()
				if id <= last {
					t.Errorf("%d after %d", id, last)
				}
				last = id
				mu.Lock()
				ids[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(ids) != 4000 {
		t.Fatalf("%d unique ids of 4000", len(ids))
	}
	for id := range ids {
		if m := id >> sequenceBits & (1<<machineBits - 1); m != 0xabc {
			t.Fatalf("machine %x in %d", m, id)
		}
		if ms := id >> (machineBits + sequenceBits); ms < 5000 || ms > 5003 {
			t.Fatalf("tick %d in %d", ms, id)
		}
	}
	now = now.Add(time.Second)
	if ms := f.snowflake() >> (machineBits + sequenceBits); ms != 6000 {
		t.Errorf("tick %d after a second, want 6000", ms)
	}
}

func BenchmarkRequestID(b *testing.B) {
	for _, alg := range []string{"uuid", "uuidv7", "nanoid", "snowflake"} {
		b.Run(alg, func(b *testing.B) {
			in := plugintest.New(b, New(1), `{"algorithm":"`+alg+`"}`)
			rw, hf := in.(gateway.Rewriter), in.(gateway.HeaderFilter)
			c := plugintest.NewCtx(nil)
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				rw.Rewrite(c)
				hf.FilterHeaders(c)
			}
		})
	}
}
