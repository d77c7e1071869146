package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// Client speaks this package's API to a running linkgate server, over
// net/http: what the linkgate commands use to operate a server whose
// store they cannot open (a running server holds it). Error answers come
// back as *APIError, which matches the domain's errors (errors.Is(err,
// shortener.ErrNotFound), shortener.ErrorCode) when the server answered
// a domain code, so callers handle them as they would a store's.
type Client struct {
	base string // scheme://host[:port][/path], without a trailing slash
	key  string // sent as Authorization: Bearer; "" none
	hc   *http.Client
}

// LinkJSON is a link as the API answers it.
type LinkJSON = linkJSON

// KeyJSON is an API key as the API answers it (Token only in a create's
// answer).
type KeyJSON = keyJSON

// LinkView is l as the API shows it, for a program that reads a store
// directly: Domain is the link's stored domain ("" the default) and
// ShortURL is empty, since only a server knows its addresses.
func LinkView(l shortener.Link) LinkJSON {
	out := linkJSON{ID: l.ID, Domain: l.Domain, URL: l.URL, Tags: l.Tags}
	if !l.CreatedAt.IsZero() {
		s := l.CreatedAt.UTC().Format(time.RFC3339)
		out.CreatedAt = &s
	}
	if !l.ExpiresAt.IsZero() {
		s := l.ExpiresAt.UTC().Format(time.RFC3339)
		out.ExpiresAt = &s
	}
	if l.MaxVisits > 0 {
		out.MaxVisits = &l.MaxVisits
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	if l.ForwardQuery != shortener.ForwardDefault {
		on := l.ForwardQuery == shortener.ForwardOn
		out.ForwardQuery = &on
	}
	return out
}

// KeyView is k as the API shows it (without its token).
func KeyView(k shortener.APIKey) KeyJSON { return keyView(k) }

// NewClient returns a client of the server at base (an http(s) URL,
// such as http://127.0.0.1:8080) that sends key with every request. hc
// nil: a client with no overall timeout (exports and imports take as
// long as they take), which gives up on a server that does not answer
// the request's headers within a minute.
func NewClient(base, key string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("server %q: want an http(s) URL such as http://127.0.0.1:8080", base)
	}
	if strings.ContainsAny(key, "\r\n") {
		return nil, errors.New("the key holds a line break")
	}
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = time.Minute
		hc = &http.Client{Transport: tr}
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), key: key, hc: hc}, nil
}

// APIError is an error answer of the server.
type APIError struct {
	Status  int    // HTTP status
	Code    string // the body's error code (slug_taken, not_found, unauthorized, …)
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
}

// Unwrap is the domain error of the answer's code, if it has one: the
// reverse of statusOf.
func (e *APIError) Unwrap() error {
	var c shortener.Code
	switch e.Code {
	case codeSlugTaken:
		c = shortener.Conflict
	case string(shortener.NotFound), string(shortener.Expired), string(shortener.Unavailable),
		string(shortener.InvalidURL), string(shortener.URLTooLong), string(shortener.SchemeNotAllowed),
		string(shortener.SelfReference), string(shortener.BlockedDomain), string(shortener.InvalidSlug),
		string(shortener.InvalidParameter), string(shortener.Internal):
		c = shortener.Code(e.Code)
	case codeOverloaded:
		c = shortener.Unavailable
	default:
		return nil
	}
	return &shortener.Error{Code: c, Message: e.Message}
}

// do sends a request and decodes a 2xx JSON answer into out (nil: none).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the API's JSON: %w", method, path, err)
	}
	return nil
}

// send sends a request (body: JSON of it, or an io.Reader sent as it
// is) and returns a 2xx answer; another is returned as its *APIError. A
// shed request (503 overloaded) is asked again after its Retry-After, a
// few times, when its body can be sent again.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var payload []byte
	var stream io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		stream = b
	default:
		var err error
		if payload, err = json.Marshal(b); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		var rd io.Reader = stream
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err != nil {
			return nil, err
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if stream != nil {
			req.Header.Set("Content-Type", contentTypeJSONLines)
		}
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		apiErr := readAPIError(resp)
		resp.Body.Close()
		if apiErr.Code != codeOverloaded || stream != nil || attempt == 4 {
			return nil, apiErr
		}
		wait := time.Second
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 && s <= 30 {
			wait = time.Duration(s) * time.Second
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// readAPIError reads an error answer: the API's JSON error, or what
// something else in front of the server (a proxy) answered.
func readAPIError(resp *http.Response) *APIError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb errorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error.Code != "" {
		return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = resp.Status
	}
	return &APIError{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: msg}
}

// linkPath is a link's API path, with ?domain= when domain is not "".
func linkQuery(domain string) url.Values {
	if domain == "" {
		return nil
	}
	return url.Values{"domain": {domain}}
}

// CreateLink creates a link. Domain, if not "", names the link's domain
// as the server knows it (its host); Host is not used.
func (c *Client) CreateLink(ctx context.Context, r shortener.CreateRequest) (LinkJSON, error) {
	req := createRequest{URL: r.URL, Slug: r.Slug, Tags: r.Tags}
	if !r.ExpiresAt.IsZero() {
		s := r.ExpiresAt.UTC().Format(time.RFC3339)
		req.ExpiresAt = &s
	}
	if r.MaxVisits != 0 {
		req.MaxVisits = &r.MaxVisits
	}
	if r.ForwardQuery != shortener.ForwardDefault {
		on := r.ForwardQuery == shortener.ForwardOn
		req.ForwardQuery = &on
	}
	if r.Domain != "" {
		req.Domain = &r.Domain
	}
	var out LinkJSON
	err := c.do(ctx, http.MethodPost, "/api/v1/links", nil, req, &out)
	return out, err
}

// GetLink returns the link id on domain ("": the server's default).
func (c *Client) GetLink(ctx context.Context, domain, id string) (LinkJSON, error) {
	var out LinkJSON
	err := c.do(ctx, http.MethodGet, "/api/v1/links/"+url.PathEscape(id), linkQuery(domain), nil, &out)
	return out, err
}

// UpdateLink edits the link id on domain: each non-nil field of u is
// set (a zero ExpiresAt or MaxVisits, and ForwardDefault, reset theirs).
func (c *Client) UpdateLink(ctx context.Context, domain, id string, u shortener.LinkUpdate) (LinkJSON, error) {
	patch := map[string]any{}
	if u.URL != nil {
		patch["url"] = *u.URL
	}
	if u.ExpiresAt != nil {
		patch["expires_at"] = nil
		if !u.ExpiresAt.IsZero() {
			patch["expires_at"] = u.ExpiresAt.UTC().Format(time.RFC3339)
		}
	}
	if u.MaxVisits != nil {
		patch["max_visits"] = nil
		if *u.MaxVisits != 0 {
			patch["max_visits"] = *u.MaxVisits
		}
	}
	if u.Tags != nil {
		patch["tags"] = *u.Tags
		if *u.Tags == nil {
			patch["tags"] = []string{}
		}
	}
	if u.ForwardQuery != nil {
		patch["forward_query"] = nil
		if *u.ForwardQuery != shortener.ForwardDefault {
			patch["forward_query"] = *u.ForwardQuery == shortener.ForwardOn
		}
	}
	var out LinkJSON
	err := c.do(ctx, http.MethodPatch, "/api/v1/links/"+url.PathEscape(id), linkQuery(domain), patch, &out)
	return out, err
}

// DeleteLink deletes the link id on domain.
func (c *Client) DeleteLink(ctx context.Context, domain, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/links/"+url.PathEscape(id), linkQuery(domain), nil, nil)
}

// ListQuery selects a page of links: Filter as the API's filters
// (Domain by the domain's name), newest first when any is set.
type ListQuery struct {
	Cursor string
	Limit  int // 0: the server's default
	Filter shortener.ListFilter
}

// ListLinks returns a page of links and the cursor of the next ("" after
// the last).
func (c *Client) ListLinks(ctx context.Context, q ListQuery) ([]LinkJSON, string, error) {
	v := url.Values{}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	f := q.Filter
	if f.Tag != "" {
		v.Set("tag", f.Tag)
	}
	if f.Query != "" {
		v.Set("q", f.Query)
	}
	if f.Domain != nil {
		v.Set("domain", *f.Domain)
	}
	if !f.CreatedAfter.IsZero() {
		v.Set("created_after", f.CreatedAfter.UTC().Format(time.RFC3339))
	}
	if !f.CreatedBefore.IsZero() {
		v.Set("created_before", f.CreatedBefore.UTC().Format(time.RFC3339))
	}
	var out struct {
		Links      []LinkJSON `json:"links"`
		NextCursor *string    `json:"next_cursor"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/links", v, nil, &out); err != nil {
		return nil, "", err
	}
	next := ""
	if out.NextCursor != nil {
		next = *out.NextCursor
	}
	return out.Links, next, nil
}

// CreateKey creates an API key; the answer holds its token, which the
// server shows only this once.
func (c *Client) CreateKey(ctx context.Context, name string, scopes []shortener.Scope) (KeyJSON, error) {
	req := struct {
		Name   string            `json:"name"`
		Scopes []shortener.Scope `json:"scopes"`
	}{name, scopes}
	var out KeyJSON
	err := c.do(ctx, http.MethodPost, "/api/v1/keys", nil, req, &out)
	return out, err
}

// ListKeys returns every API key, without secrets.
func (c *Client) ListKeys(ctx context.Context) ([]KeyJSON, error) {
	var out struct {
		Keys []KeyJSON `json:"keys"`
	}
	err := c.do(ctx, http.MethodGet, "/api/v1/keys", nil, nil, &out)
	return out.Keys, err
}

// DeleteKey revokes the API key id.
func (c *Client) DeleteKey(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/keys/"+url.PathEscape(id), nil, nil, nil)
}

// errCutShort is the error of a streamed answer that ended before its
// end.
var errCutShort = errors.New("the server's answer was cut short")

// Export writes every link with its statistics to w, in format (jsonl or
// csv), as the server streams them. An export the server could not
// finish is an error, never a short file that looks whole.
func (c *Client) Export(ctx context.Context, format string, w io.Writer) error {
	return c.download(ctx, "/api/v1/export", url.Values{"format": {format}}, w)
}

// Backup writes a consistent copy of the server's store to w: a tar
// archive (pebble.Unpack makes it a store again).
func (c *Client) Backup(ctx context.Context, w io.Writer) error {
	return c.download(ctx, "/api/v1/backup", nil, w)
}

func (c *Client) download(ctx context.Context, path string, q url.Values, w io.Writer) error {
	resp, err := c.send(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%s: %w", path, errCutShort)
		}
		return err
	}
	return nil
}

// Import sends body, JSON Lines as Export writes them, to the server,
// which imports it as it arrives, and calls fn with each line of the
// answer as it comes (refused lines and the summaries after each
// durable batch). It returns the last summary: what is imported, also
// when the import was cut short (then with an error).
func (c *Client) Import(ctx context.Context, body io.Reader, fn func(ImportLine) error) (ImportSummary, error) {
	var sum ImportSummary
	// The body is sent while the answer is read: net/http's transport
	// writes it from a goroutine of its own.
	resp, err := c.send(ctx, http.MethodPost, "/api/v1/import", nil, body)
	if err != nil {
		return sum, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l ImportLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return sum, fmt.Errorf("import: the answer is not the API's JSON Lines: %w", err)
		}
		if l.Summary != nil {
			sum = *l.Summary
		}
		switch {
		case l.Error != nil:
			return sum, fmt.Errorf("import: %s (%s)", l.Error.Message, l.Error.Code)
		case l.Done:
			return sum, nil
		}
		if fn != nil {
			if err := fn(l); err != nil {
				return sum, err
			}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return sum, fmt.Errorf("import: %w", err)
	}
	return sum, fmt.Errorf("import: %w", errCutShort)
}
