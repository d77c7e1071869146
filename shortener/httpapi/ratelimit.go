package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"
)

// Create rate limits: a token bucket (golang.org/x/time/rate) per client
// address (an IPv6 client per /64, which one subscriber usually has to
// itself) and, for requests with an API key, per key instead. A bucket
// holds Rate.N creates and refills at N per Rate.Per; a create with an
// empty bucket answers 429 rate_limited with Retry-After. Every create
// answer carries RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
// (draft-ietf-httpapi-ratelimit-headers). Buckets of clients not seen for
// a while are forgotten (a forgotten bucket is a full one), at most
// maxBuckets are kept.

// Rate is N events per Per; the zero Rate is no limit.
type Rate struct {
	N   int
	Per time.Duration
}

// ParseRate parses "N/s", "N/m", "N/h" (also "N/sec", "N/min", "N/hour")
// or "0" (no limit).
func ParseRate(s string) (Rate, error) {
	if s == "0" || s == "" {
		return Rate{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count <= 0 {
		return Rate{}, fmt.Errorf("rate %q: want N/s, N/m or N/h with N > 0, or 0 for none", s)
	}
	switch per {
	case "s", "sec", "second":
		return Rate{count, time.Second}, nil
	case "m", "min", "minute":
		return Rate{count, time.Minute}, nil
	case "h", "hour":
		return Rate{count, time.Hour}, nil
	}
	return Rate{}, fmt.Errorf("rate %q: the period must be s, m or h", s)
}

func (r Rate) String() string {
	if r.N == 0 {
		return "0"
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	if unit == "" {
		return fmt.Sprintf("%d/%s", r.N, r.Per)
	}
	return fmt.Sprintf("%d/%s", r.N, unit)
}

func (r Rate) limit() rate.Limit { return rate.Limit(float64(r.N) / r.Per.Seconds()) }

// maxBuckets bounds the clients and keys whose buckets are kept.
const maxBuckets = 100_000

// buckets are the token buckets of one kind of requester.
type buckets struct {
	rate  Rate
	cache *otter.Cache[string, *rate.Limiter]
}

func newBuckets(r Rate) (*buckets, error) {
	if r.N == 0 {
		return nil, nil
	}
	// Idle for as long as a bucket takes to refill: it is full again, so
	// forgetting it changes nothing.
	idle := max(r.Per, time.Second)
	c, err := otter.New(&otter.Options[string, *rate.Limiter]{
		MaximumSize:      maxBuckets,
		ExpiryCalculator: otter.ExpiryAccessing[string, *rate.Limiter](idle),
	})
	if err != nil {
		return nil, err
	}
	return &buckets{rate: r, cache: c}, nil
}

// take takes a token from key's bucket at now. It returns whether one was
// there, the tokens left, and how long until the next one (when none was
// there) or until the bucket is full again.
func (b *buckets) take(key string, now time.Time) (ok bool, left int, wait time.Duration) {
	lim, _ := b.cache.Get(context.Background(), key, otter.LoaderFunc[string, *rate.Limiter](func(context.Context, string) (*rate.Limiter, error) {
		return rate.NewLimiter(b.rate.limit(), b.rate.N), nil
	}))
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, 0, d
	}
	tokens := lim.TokensAt(now)
	full := time.Duration((float64(b.rate.N) - tokens) / float64(b.rate.limit()) * float64(time.Second))
	return true, int(math.Floor(tokens)), full
}

// clientKey is the bucket key of an address: IPv4 as it is, IPv6 by /64.
func clientKey(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.Unmap().String()
}

// seconds rounds d up to whole seconds, at least 1.
func seconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// allowCreate applies the create rate limit to a request: by its API key
// when it has one (key != ""), else by its client address. It sets the
// RateLimit-* headers and, when the bucket is empty, answers 429 and
// returns false.
func (h *Handler) allowCreate(ctx *fasthttp.RequestCtx, key string) bool {
	b, k := h.createIP, ""
	if key != "" && h.createKey != nil {
		b, k = h.createKey, "k:"+key
	} else if b != nil {
		ip, _ := h.cfg.TrustedProxies.client(ctx)
		k = clientKey(ip)
	}
	if b == nil {
		return true
	}
	ok, left, wait := b.take(k, h.now())
	hdr := &ctx.Response.Header
	hdr.Set("RateLimit-Limit", strconv.Itoa(b.rate.N))
	hdr.Set("RateLimit-Remaining", strconv.Itoa(left))
	hdr.Set("RateLimit-Reset", strconv.Itoa(seconds(wait)))
	if ok {
		return true
	}
	h.metrics.limited.Inc()
	hdr.Set("Retry-After", strconv.Itoa(seconds(wait)))
	writeError(ctx, fasthttp.StatusTooManyRequests, codeRateLimited,
		fmt.Sprintf("too many creates: at most %s; retry in %d s", b.rate, seconds(wait)))
	return false
}
