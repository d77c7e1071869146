package httpapi_test

import (
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// A Host header is the client's to choose: it never reaches a returned
// link unless it names this machine (a local install) or is configured.
func TestHostNeverReachesLinks(t *testing.T) {
	s := start(t, setup{})
	addr := strings.TrimPrefix(s.URL, "http://")
	for _, tt := range []struct{ host, base string }{
		{"evil.example", s.URL},
		{"evil.example:8080", s.URL},
		{strings.Repeat("h", 3000), s.URL},
		{"localhost.evil.example", s.URL},
		{"127.0.0.1.evil.example", s.URL},
		{"localhost:1234", "http://localhost:1234"},
		{"[::1]:99", "http://[::1]:99"},
		{"127.0.0.1", "http://127.0.0.1"},
		{addr, s.URL},
	} {
		r := s.do(t, "POST", "/api/v1/links", `{"url":"https://example.com/h"}`, "Host", tt.host)
		if r.Status != 201 {
			t.Errorf("Host %.40q: create %d %q", tt.host, r.Status, r.Body)
			continue
		}
		l := decodeLink(t, r)
		if want := tt.base + "/" + l.ID; l.ShortURL != want {
			t.Errorf("Host %.40q: short_url %q, want %q", tt.host, l.ShortURL, want)
		}
		for _, q := range []string{"", "?format=svg", "?size=2048"} {
			if qr := s.do(t, "GET", "/api/v1/links/"+l.ID+"/qr"+q, "", "Host", tt.host); qr.Status != 200 {
				t.Errorf("Host %.40q: QR%s %d %q", tt.host, q, qr.Status, qr.Body)
			}
		}
	}
	// With a public URL, that is the base whatever the Host.
	p := start(t, setup{cfg: httpapi.Config{PublicURL: "https://sho.rt"}})
	l := decodeLink(t, p.do(t, "POST", "/api/v1/links", `{"url":"https://example.com/h"}`, "Host", "localhost"))
	if l.ShortURL != "https://sho.rt/"+l.ID {
		t.Errorf("with a public URL: %q", l.ShortURL)
	}
}

// 64 clients asking for 2048-pixel QR codes at once: one draw per image,
// whatever the number of requests for it, and every request answered.
func TestQRDrawnOncePerImage(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{QRRenders: 1}})
	var ids []string
	for range 4 {
		ids = append(ids, decodeLink(t, s.do(t, "POST", "/api/v1/links", `{"url":"https://example.com/qr"}`)).ID)
	}
	var wg sync.WaitGroup
	bodies := make([]string, 64)
	for i := range bodies {
		wg.Go(func() {
			r := s.do(t, "GET", "/api/v1/links/"+ids[i%len(ids)]+"/qr?size=2048", "")
			if r.Status != 200 || r.Header.Get("Content-Type") != "image/png" {
				t.Errorf("QR %d: %d %q", i, r.Status, r.Body)
			}
			bodies[i] = r.Body
		})
	}
	wg.Wait()
	for i := range bodies {
		if bodies[i] != bodies[i%len(ids)] {
			t.Errorf("request %d got another image than request %d of the same link", i, i%len(ids))
		}
	}
	m := s.do(t, "GET", "/metrics", "")
	if want := "linkgate_qr_draws_total 4\n"; !strings.Contains(m.Body, want) {
		t.Errorf("/metrics lacks %q: one draw per (link, size, format)", want)
	}
	// Another size or format is another image.
	s.do(t, "GET", "/api/v1/links/"+ids[0]+"/qr?size=2047", "")
	s.do(t, "GET", "/api/v1/links/"+ids[0]+"/qr?size=2048&format=svg", "")
	if m := s.do(t, "GET", "/metrics", ""); !strings.Contains(m.Body, "linkgate_qr_draws_total 6\n") {
		t.Error("another size or format was not drawn")
	}
}

// recorder is a VisitRecorder that keeps who visited.
type recorder struct {
	mu      sync.Mutex
	clients []string
}

func (r *recorder) Record(_, _, _, _ []byte, ip netip.Addr, country string, _ time.Time, _ shortener.Link) {
	r.mu.Lock()
	r.clients = append(r.clients, ip.String()+" "+country)
	r.mu.Unlock()
}

// addrless is a recorder that does not use the client's address (as the
// visit aggregator without GeoIP).
type addrless struct{ *recorder }

func (addrless) UsesAddr() bool { return false }

// Visits are counted for the client behind trusted proxies, and for the
// peer when it is not one of them. A recorder that does not use the
// address gets none, unless trusted proxies may name a country.
func TestVisitsSeeTheClient(t *testing.T) {
	for _, tt := range []struct {
		name     string
		proxies  *httpapi.TrustedProxies
		addrless bool
		want     string
	}{
		{"behind a trusted proxy", httpapi.NewTrustedProxies([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}), false, "198.51.100.7 NZ"},
		{"from an untrusted peer", httpapi.NewTrustedProxies([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}), false, "127.0.0.1 "},
		{"no proxies", nil, false, "127.0.0.1 "},
		{"no proxies, address unused", nil, true, "invalid IP "},
		{"behind a trusted proxy, address unused", httpapi.NewTrustedProxies([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}), true, "198.51.100.7 NZ"},
	} {
		rec := &recorder{}
		var vr httpapi.VisitRecorder = rec
		if tt.addrless {
			vr = addrless{rec}
		}
		s := start(t, setup{cfg: httpapi.Config{Visits: vr, TrustedProxies: tt.proxies}})
		id := decodeLink(t, s.do(t, "POST", "/api/v1/links", `{"url":"https://example.com/v"}`)).ID
		s.do(t, "GET", "/"+id, "", "X-Forwarded-For", "6.6.6.6, 198.51.100.7", "CloudFront-Viewer-Country", "NZ")
		if len(rec.clients) != 1 || rec.clients[0] != tt.want {
			t.Errorf("%s: visits recorded %q, want %q", tt.name, rec.clients, tt.want)
		}
	}
}

// clock is a settable clock for the rate limits.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Creates are limited per client: a bucket of N that refills at N per
// period; an empty bucket answers 429 with Retry-After, and every create
// says where its client stands.
func TestCreateRateLimit(t *testing.T) {
	clk := &clock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := start(t, setup{cfg: httpapi.Config{CreateRate: httpapi.Rate{N: 3, Per: time.Minute}, Now: clk.Now,
		TrustedProxies: httpapi.NewTrustedProxies([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})}})
	create := func(client string) response {
		return s.do(t, "POST", "/api/v1/links", `{"url":"https://example.com/r"}`, "X-Forwarded-For", client)
	}
	for i, want := range []string{"2", "1", "0"} {
		r := create("198.51.100.1")
		if r.Status != 201 || r.Header.Get("RateLimit-Limit") != "3" || r.Header.Get("RateLimit-Remaining") != want || r.Header.Get("RateLimit-Reset") == "" {
			t.Fatalf("create %d: %d, RateLimit %q/%q/%q", i, r.Status, r.Header.Get("RateLimit-Limit"), r.Header.Get("RateLimit-Remaining"), r.Header.Get("RateLimit-Reset"))
		}
	}
	r := create("198.51.100.1")
	wantError(t, r, 429, "rate_limited")
	if r.Header.Get("Retry-After") != "20" || r.Header.Get("RateLimit-Remaining") != "0" {
		t.Errorf("429: Retry-After %q, Remaining %q; want 20 s (a token every 60/3 s)", r.Header.Get("Retry-After"), r.Header.Get("RateLimit-Remaining"))
	}
	// The seed's route and the form share the bucket.
	wantError(t, s.do(t, "POST", "/shortenURL", `{"OriginalURL":"https://example.com/"}`, "X-Forwarded-For", "198.51.100.1"), 429, "rate_limited")
	// Another client has its own bucket; an IPv6 client is one per /64.
	if r := create("198.51.100.2"); r.Status != 201 {
		t.Errorf("another client: %d", r.Status)
	}
	for i := range 3 {
		create("2001:db8:1:2::" + strconv.Itoa(i+1))
	}
	wantError(t, create("2001:db8:1:2:ffff::9"), 429, "rate_limited")
	if r := create("2001:db8:1:3::1"); r.Status != 201 {
		t.Errorf("another /64: %d", r.Status)
	}
	// A token comes back every 20 s.
	clk.Add(20 * time.Second)
	if r := create("198.51.100.1"); r.Status != 201 || r.Header.Get("RateLimit-Remaining") != "0" {
		t.Errorf("after 20 s: %d, remaining %q", r.Status, r.Header.Get("RateLimit-Remaining"))
	}
	wantError(t, create("198.51.100.1"), 429, "rate_limited")
	// Redirects and lookups are never limited.
	if r := s.do(t, "GET", "/api/v1/links/nope000000", "", "X-Forwarded-For", "198.51.100.1"); r.Status != 404 {
		t.Errorf("lookup of a limited client: %d", r.Status)
	}
	if m := s.do(t, "GET", "/metrics", ""); !strings.Contains(m.Body, "linkgate_http_creates_rate_limited_total 4") {
		t.Error("metrics do not count the 429s")
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]httpapi.Rate{"0": {}, "60/m": {N: 60, Per: time.Minute}, "5/s": {N: 5, Per: time.Second}, "1000/hour": {N: 1000, Per: time.Hour}} {
		if got, err := httpapi.ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"60", "-1/m", "0/m", "5/d", "x/s", "5/"} {
		if _, err := httpapi.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) succeeded", in)
		}
	}
}

// With domains, every request (but the probes) must name one of them in
// its Host, and a returned link starts with the one it named: a Host of
// the client's choosing gets 421 and never a link.
func TestDomainsCheckHost(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{Domains: []string{"sho.rt", "http://go.example.com:8080", "bücher.example"}}})
	for _, tt := range []struct{ host, base string }{
		{"sho.rt", "https://sho.rt"},
		{"SHO.RT", "https://sho.rt"},
		{"sho.rt:443", "https://sho.rt"},
		{"sho.rt.", "https://sho.rt"},
		{"go.example.com:8080", "http://go.example.com:8080"},
		{"xn--bcher-kva.example", "https://xn--bcher-kva.example"},
	} {
		r := s.do(t, "POST", "/api/v1/links", `{"url":"https://example.com/d"}`, "Host", tt.host)
		if r.Status != 201 {
			t.Errorf("Host %q: create %d %q", tt.host, r.Status, r.Body)
			continue
		}
		if l := decodeLink(t, r); l.ShortURL != tt.base+"/"+l.ID {
			t.Errorf("Host %q: short_url %q, want %s/%s", tt.host, l.ShortURL, tt.base, l.ID)
		}
	}
	id := decodeLink(t, s.do(t, "POST", "/api/v1/links", `{"url":"https://example.com/d"}`, "Host", "sho.rt")).ID
	if r := s.do(t, "GET", "/"+id, "", "Host", "sho.rt"); r.Status != 302 {
		t.Errorf("redirect on a domain: %d", r.Status)
	}
	for _, host := range []string{"evil.example", "go.example.com", "go.example.com:9090", "sho.rt.evil.example", "localhost", "127.0.0.1", strings.Repeat("h", 3000)} {
		for _, req := range [][2]string{{"POST", "/api/v1/links"}, {"POST", "/shortenURL"}, {"GET", "/" + id}, {"GET", "/api/v1/links/" + id + "/qr"}, {"GET", "/"}} {
			r := s.do(t, req[0], req[1], `{"url":"https://example.com/d","OriginalURL":"https://example.com/d"}`, "Host", host)
			wantError(t, r, 421, "misdirected_request")
			if strings.Contains(string(r.Body), "\"short") {
				t.Errorf("Host %.40q: %s %s answered a link: %q", host, req[0], req[1], r.Body)
			}
		}
	}
	// Load balancers probe with a Host of their own.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := s.do(t, "GET", p, "", "Host", "10.0.0.7"); r.Status != 200 {
			t.Errorf("%s with another Host: %d", p, r.Status)
		}
	}
}

func TestDomainsConfig(t *testing.T) {
	for _, d := range [][]string{{"https://sho.rt/path"}, {"ftp://sho.rt"}, {"10.0.0.1"}, {"sho.rt", "SHO.rt"}, {"user@sho.rt"}, {"sho..rt"}} {
		if err := (httpapi.Config{Domains: d}).Validate(); err == nil {
			t.Errorf("domains %q accepted", d)
		}
	}
	if err := (httpapi.Config{Domains: []string{"sho.rt"}, PublicURL: "https://sho.rt"}).Validate(); err == nil {
		t.Error("domains with a public URL accepted")
	}
}
