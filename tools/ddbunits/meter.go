package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// meter is a reverse proxy in front of DynamoDB (Local) that asks every
// request for its consumed capacity (ReturnConsumedCapacity: TOTAL) and
// sums what DynamoDB reports, per operation and per kind of item. It is
// how make bench-dynamodb measures any build, old or new, the same way:
// the build under test needs no instrumentation.
//
// DynamoDB Local does not check request signatures, so rewriting the body
// is harmless there; in front of real DynamoDB it would break SigV4, which
// is why this is a benchmark tool and not a feature.
//
// What DynamoDB Local does not report, although DynamoDB bills it, is
// computed from item sizes by DynamoDB's published rules (units.go) and
// counted apart, in Computed: a write refused by its condition
// (ConditionalCheckFailedException, or a transaction cancelled by one)
// carries no ConsumedCapacity, and a BatchGetItem reports nothing for the
// keys it did not find.
type meter struct {
	proxy *httputil.ReverseProxy

	mu     sync.Mutex
	counts map[opKey]*opCount
}

// opKey is what units are summed by: the operation (GetItem…) and the
// class of the item it addresses: "link" for link items, "stats" for keys
// under the reserved prefix linkgate: (statistics, counters, logs), "mixed"
// for batches that address both.
type opKey struct {
	Op, Class string
}

type opCount struct {
	Calls  int64   // requests answered 200
	Units  float64 // capacity units DynamoDB reported
	Items  int64   // items addressed (batches count each)
	Failed int64   // conditional writes refused (billed, not reported)
	Errors int64   // other error answers
	// Computed is the capacity units DynamoDB Local did not report and
	// DynamoDB bills, computed by DynamoDB's rules (units.go): refused
	// conditional writes, keys a BatchGetItem did not find.
	Computed float64
}

func newMeter(target *url.URL) *meter {
	m := &meter{counts: map[opKey]*opCount{}}
	m.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			// Uncompressed answers, so ModifyResponse can read them.
			r.Out.Header.Del("Accept-Encoding")
		},
		ModifyResponse: m.record,
		// A client that gave up (its deadline passed) is not an error of
		// DynamoDB's; it is counted with the errors.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if k, ok := r.Context().Value(ctxKey{}).(requestInfo); ok {
				m.mu.Lock()
				m.count(k.opKey).Errors++
				m.mu.Unlock()
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return m
}

// ctxKey carries the request's operation and class to ModifyResponse.
type ctxKey struct{}

func (m *meter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	body, key := rewriteRequest(op, body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, key))
	m.proxy.ServeHTTP(w, r)
}

// record adds what one answer reports to the counts.
func (m *meter) record(resp *http.Response) error {
	k, ok := resp.Request.Context().Value(ctxKey{}).(requestInfo)
	if !ok || k.Op == "" {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	units, failed, ok := parseResponse(resp.StatusCode, body)
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.count(k.opKey)
	switch {
	case ok:
		c.Calls++
		c.Units += units
		c.Items += int64(k.Items)
		c.Computed += k.unreported(body)
	case failed:
		c.Failed++
		c.Computed += k.refused(body)
	default:
		c.Errors++
	}
	return nil
}

// count returns the counts of k. The caller holds mu.
func (m *meter) count(k opKey) *opCount {
	c := m.counts[k]
	if c == nil {
		c = &opCount{}
		m.counts[k] = c
	}
	return c
}

// snapshot returns a copy of the counts.
func (m *meter) snapshot() map[opKey]opCount {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[opKey]opCount, len(m.counts))
	for k, c := range m.counts {
		out[k] = *c
	}
	return out
}

// reset zeroes the counts.
func (m *meter) reset() {
	m.mu.Lock()
	m.counts = map[opKey]*opCount{}
	m.mu.Unlock()
}

// requestInfo is what the request said: its operation, the class of its
// items, how many, and what the units DynamoDB Local does not report are
// computed from (units.go).
type requestInfo struct {
	opKey
	Items int
	// Sizes are the sizes of the items a write puts (PutItem, and each
	// action of a TransactWriteItems in order; 0 for the others).
	Sizes []int
	// Reads is, for BatchGetItem, the keys asked for and their
	// consistency, per table.
	Reads map[string]batchRead
}

// reservedPrefix starts every key linkgate uses for something other than a
// link (ids cannot contain ':').
const reservedPrefix = "linkgate:"

// rewriteRequest adds ReturnConsumedCapacity: TOTAL to a request of an
// operation that takes it, and says what the request addresses.
func rewriteRequest(op string, body []byte) ([]byte, requestInfo) {
	info := requestInfo{opKey: opKey{Op: op}}
	var req map[string]json.RawMessage
	if !capacityOps[op] || json.Unmarshal(body, &req) != nil {
		return body, info
	}
	info.Class, info.Items = classify(op, req)
	info.Sizes, info.Reads = sizes(op, req)
	req["ReturnConsumedCapacity"] = json.RawMessage(`"TOTAL"`)
	askOldItems(op, req)
	b, err := json.Marshal(req)
	if err != nil {
		return body, info
	}
	return b, info
}

// capacityOps are the operations that report consumed capacity.
var capacityOps = map[string]bool{
	"GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true,
	"BatchGetItem": true, "BatchWriteItem": true, "Query": true, "Scan": true,
	"TransactGetItems": true, "TransactWriteItems": true,
}

// classify returns the class of the items a request addresses and how
// many there are (0 for Query and Scan, which address a range).
func classify(op string, req map[string]json.RawMessage) (string, int) {
	var keys []string
	switch op {
	case "GetItem", "UpdateItem", "DeleteItem":
		keys = append(keys, keyOf(req["Key"]))
	case "PutItem":
		keys = append(keys, keyOf(req["Item"]))
	case "BatchGetItem":
		var items map[string]struct{ Keys []json.RawMessage }
		json.Unmarshal(req["RequestItems"], &items)
		for _, t := range items {
			for _, k := range t.Keys {
				keys = append(keys, keyOf(k))
			}
		}
	case "BatchWriteItem":
		var items map[string][]struct {
			PutRequest    *struct{ Item json.RawMessage }
			DeleteRequest *struct{ Key json.RawMessage }
		}
		json.Unmarshal(req["RequestItems"], &items)
		for _, t := range items {
			for _, w := range t {
				switch {
				case w.PutRequest != nil:
					keys = append(keys, keyOf(w.PutRequest.Item))
				case w.DeleteRequest != nil:
					keys = append(keys, keyOf(w.DeleteRequest.Key))
				}
			}
		}
	case "TransactWriteItems", "TransactGetItems":
		var items []map[string]struct {
			Key, Item json.RawMessage
		}
		json.Unmarshal(req["TransactItems"], &items)
		for _, it := range items {
			for _, a := range it {
				if a.Item != nil {
					keys = append(keys, keyOf(a.Item))
				} else {
					keys = append(keys, keyOf(a.Key))
				}
			}
		}
	default:
		return "scan", 0
	}
	class := ""
	for _, k := range keys {
		c := "link"
		if strings.HasPrefix(k, reservedPrefix) {
			c = "stats"
		}
		switch {
		case class == "":
			class = c
		case class != c:
			class = "mixed"
		}
	}
	return class, len(keys)
}

// keyOf returns the shortURL of a key or item in DynamoDB JSON.
func keyOf(raw json.RawMessage) string {
	var k struct {
		ShortURL struct{ S string } `json:"shortURL"`
	}
	json.Unmarshal(raw, &k)
	return k.ShortURL.S
}

// parseResponse reads the capacity units an answer reports (summed over
// tables and indexes for batches). failed is true for a write refused by
// its condition (or a transaction cancelled); ok for an answer that
// succeeded.
func parseResponse(status int, body []byte) (units float64, failed, ok bool) {
	if status != http.StatusOK {
		var e struct {
			Type string `json:"__type"`
		}
		json.Unmarshal(body, &e)
		refused := strings.HasSuffix(e.Type, "#ConditionalCheckFailedException") || strings.HasSuffix(e.Type, "#TransactionCanceledException")
		return 0, refused, false
	}
	var r struct {
		ConsumedCapacity json.RawMessage
	}
	if json.Unmarshal(body, &r) != nil {
		return 0, false, true
	}
	type capacity struct{ CapacityUnits float64 }
	var one capacity
	var many []capacity
	switch {
	case len(r.ConsumedCapacity) == 0:
	case json.Unmarshal(r.ConsumedCapacity, &many) == nil:
		for _, c := range many {
			units += c.CapacityUnits
		}
	case json.Unmarshal(r.ConsumedCapacity, &one) == nil:
		units = one.CapacityUnits
	}
	return units, false, true
}
