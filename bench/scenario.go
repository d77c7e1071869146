package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Scenario is one of the built-in workloads for linkgate serve's
// seed-compatible API: POST /shortenURL {"OriginalURL": …} answers 201 with
// {"shortURL": id}, and GET /{id} answers 302 (never followed).
type Scenario struct {
	Name            string      // "shorten", "redirect" or "mixed"
	RedirectPercent int         // share of redirects in "mixed"
	Preload         int         // links created before the run for redirects
	Uniform         bool        // pick links uniformly instead of Zipf(1.1)
	TLS             *tls.Config // for preloading an https:// target (nil: verify with the system's roots)
}

// DefaultPreload is the number of links created for redirect scenarios when
// --preload is not given.
const DefaultPreload = 1000

// ParseScenario reads "shorten", "redirect" or "mixed:P" (P% redirects, the
// rest creates; "mixed" alone is mixed:90).
func ParseScenario(s string) (Scenario, error) {
	name, arg, hasArg := strings.Cut(s, ":")
	switch {
	case (name == "shorten" || name == "redirect") && !hasArg:
		sc := Scenario{Name: name}
		if name == "redirect" {
			sc.RedirectPercent = 100
		}
		return sc, nil
	case name == "mixed":
		p := 90
		if hasArg {
			n, err := strconv.Atoi(arg)
			if err != nil || n < 0 || n > 100 {
				return Scenario{}, fmt.Errorf("invalid scenario %q: mixed:P needs a redirect percentage 0-100", s)
			}
			p = n
		}
		return Scenario{Name: "mixed", RedirectPercent: p}, nil
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (want shorten, redirect or mixed:90)", s)
}

// NeedsLinks reports whether the scenario redirects and so needs preloaded
// links.
func (s Scenario) NeedsLinks() bool { return s.RedirectPercent > 0 }

// Prepare creates the links the scenario redirects to (--preload of them,
// through the target's own POST /shortenURL) and returns the factory of
// per-thread request sources.
func (s Scenario) Prepare(ctx context.Context, target *url.URL, headers Fields) (func(thread int) (Requester, error), error) {
	host := HostHeader(target.Hostname(), target.Port())
	if h, ok := headers.Get("Host"); ok {
		host = h
	}
	var extra []byte
	for _, h := range headers {
		if !strings.EqualFold(h.Name, "Host") && !strings.EqualFold(h.Name, "Content-Length") &&
			!strings.EqualFold(h.Name, "Content-Type") {
			extra = appendField(extra, h.Name, h.Value)
		}
	}
	base := strings.TrimSuffix(target.Path, "/")
	sh := &shortenTemplate{}
	sh.build(base, host, extra, fmt.Sprintf("%08x", rand.Uint32()))

	var ids []string
	if s.NeedsLinks() {
		n := s.Preload
		if n <= 0 {
			n = DefaultPreload
		}
		var err error
		if ids, err = Preload(ctx, target, n, headers, s.TLS); err != nil {
			return nil, err
		}
	}
	return func(thread int) (Requester, error) {
		r := &scenarioRequester{shorten: sh, thread: uint64(thread), percent: s.RedirectPercent,
			rng: rand.New(rand.NewPCG(uint64(thread)+1, uint64(time.Now().UnixNano())))}
		if len(ids) > 0 {
			r.ids = ids
			r.redirectHead = []byte("GET " + base + "/")
			r.redirectTail = append([]byte(" HTTP/1.1\r\nHost: "+host+"\r\n"), extra...)
			r.redirectTail = append(r.redirectTail, "\r\n"...)
			if !s.Uniform && len(ids) > 1 {
				r.zipf = rand.NewZipf(r.rng, 1.1, 1, uint64(len(ids)-1))
			}
		}
		return r, nil
	}, nil
}

// shortenTemplate is a POST /shortenURL request with a fixed-width counter in
// its body, so every request is unique and has the same Content-Length.
type shortenTemplate struct {
	head, tail []byte // before and after the counter
}

// counterWidth digits: thread (4) and sequence (12).
const counterWidth = 16

func (t *shortenTemplate) build(base, host string, extra []byte, nonce string) {
	prefix := `{"OriginalURL":"https://example.com/linkgate-bench/` + nonce + `/`
	suffix := `"}`
	bodyLen := len(prefix) + counterWidth + len(suffix)
	head := "POST " + base + "/shortenURL HTTP/1.1\r\nHost: " + host + "\r\n"
	t.head = append([]byte(head), extra...)
	t.head = append(t.head, "Content-Type: application/json\r\nContent-Length: "+strconv.Itoa(bodyLen)+"\r\n\r\n"+prefix...)
	t.tail = []byte(suffix)
}

type scenarioRequester struct {
	shorten                    *shortenTemplate
	thread, seq                uint64
	percent                    int
	rng                        *rand.Rand
	ids                        []string
	zipf                       *rand.Zipf
	redirectHead, redirectTail []byte
}

// Request appends a redirect or a create, as the mix says. It does not
// allocate once dst has grown.
func (r *scenarioRequester) Request(dst []byte) ([]byte, error) {
	if r.percent >= 100 || (r.percent > 0 && r.rng.IntN(100) < r.percent) {
		var i uint64
		switch {
		case r.zipf != nil:
			i = r.zipf.Uint64()
		case len(r.ids) > 1:
			i = r.rng.Uint64N(uint64(len(r.ids)))
		}
		dst = append(dst, r.redirectHead...)
		dst = append(dst, r.ids[i]...)
		return append(dst, r.redirectTail...), nil
	}
	r.seq++
	dst = append(dst, r.shorten.head...)
	dst = appendUnique(dst, r.thread%10000, 4)
	dst = appendUnique(dst, r.seq%1e12, counterWidth-4)
	return append(dst, r.shorten.tail...), nil
}

// Preload creates n links through POST /shortenURL on target and returns
// their ids. It uses 16 connections and stops at the first failure; tc
// configures TLS for an https:// target.
func Preload(ctx context.Context, target *url.URL, n int, headers Fields, tc *tls.Config) ([]string, error) {
	endpoint := strings.TrimSuffix(target.Scheme+"://"+target.Host+target.Path, "/") + "/shortenURL"
	client := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{MaxIdleConnsPerHost: 16, TLSClientConfig: tc},
	}
	defer client.CloseIdleConnections()
	ids := make([]string, n)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan int)
	)
	for range min(16, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id, err := createLink(ctx, client, endpoint, headers, fmt.Sprintf("https://example.com/linkgate-preload/%d", i))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				ids[i] = id
			}
		}()
	}
	for i := range n {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("preload: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("preload: %w", err)
	}
	return ids, nil
}

func createLink(ctx context.Context, client *http.Client, endpoint string, headers Fields, original string) (string, error) {
	body, _ := json.Marshal(map[string]string{"OriginalURL": original})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	for _, h := range headers {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Set(h.Name, h.Value)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: status %d: %s", endpoint, resp.StatusCode, bytes.TrimSpace(data))
	}
	var out struct {
		ShortURL string `json:"shortURL"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return "", fmt.Errorf("POST %s: decode response: %w", endpoint, err)
	}
	id := out.ShortURL
	// Accept a full short URL as well as a bare id.
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	if id == "" || strings.ContainsAny(id, " \r\n?#") {
		return "", errors.New("POST " + endpoint + ": response has no usable shortURL")
	}
	return id, nil
}
