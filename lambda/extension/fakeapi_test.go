package extension_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAPI is an in-test Lambda Runtime API: the Extensions API and the
// Telemetry API subscription, checking the protocol as it goes. Test code
// feeds events with send and reads what the extension did from the fields.
type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server

	// Set before the extension starts.
	telemetry      string   // "ok", "notsupported", "validation-first" (400 to the first schema)
	registerErrors []string // errorType to answer the first registrations with (403)
	chunked        bool     // send events with chunked transfer encoding

	events chan string // event bodies handed out by /event/next

	mu           sync.Mutex
	id           string
	registered   []string // event lists registered, in order
	nextCalls    int
	nextWaiting  chan int // receives nextCalls each time /event/next is requested
	schemas      []string
	listener     string // host:port the telemetry goes to (sandbox.localdomain mapped to 127.0.0.1)
	errorsPosted []string
	errorBodies  []string
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, telemetry: "ok", events: make(chan string, 16), nextWaiting: make(chan int, 64)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// addr is the value for AWS_LAMBDA_RUNTIME_API.
func (f *fakeAPI) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeAPI) fail(w http.ResponseWriter, format string, args ...any) {
	f.t.Errorf("fake runtime API: "+format, args...)
	w.WriteHeader(http.StatusBadRequest)
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/2020-01-01/extension/register":
		f.register(w, r, body)
	case "/2020-01-01/extension/event/next":
		if r.Method != http.MethodGet || !f.checkID(w, r) {
			return
		}
		f.mu.Lock()
		f.nextCalls++
		n := f.nextCalls
		f.mu.Unlock()
		f.nextWaiting <- n
		select {
		case ev := <-f.events:
			w.Header().Set("Lambda-Extension-Event-Identifier", fmt.Sprintf("ev-%d", n))
			w.Header().Set("Content-Type", "application/json")
			if f.chunked {
				io.WriteString(w, ev[:len(ev)/2])
				w.(http.Flusher).Flush()
				ev = ev[len(ev)/2:]
			}
			io.WriteString(w, ev)
		case <-r.Context().Done():
		}
	case "/2020-01-01/extension/init/error", "/2020-01-01/extension/exit/error":
		if r.Method != http.MethodPost || !f.checkID(w, r) {
			return
		}
		typ := r.Header.Get("Lambda-Extension-Function-Error-Type")
		if typ == "" {
			f.fail(w, "%s without Lambda-Extension-Function-Error-Type", r.URL.Path)
			return
		}
		var e struct{ ErrorMessage, ErrorType string }
		if err := json.Unmarshal(body, &e); err != nil || e.ErrorType != typ {
			f.fail(w, "%s body %q: %v", r.URL.Path, body, err)
			return
		}
		f.mu.Lock()
		f.errorsPosted = append(f.errorsPosted, strings.TrimPrefix(r.URL.Path, "/2020-01-01/extension/")+" "+typ)
		f.errorBodies = append(f.errorBodies, e.ErrorMessage)
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"status":"OK"}`)
	case "/2022-07-01/telemetry":
		f.subscribe(w, r, body)
	default:
		f.fail(w, "unexpected %s %s", r.Method, r.URL)
	}
}

func (f *fakeAPI) register(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Method != http.MethodPost {
		f.fail(w, "register with %s", r.Method)
		return
	}
	if name := r.Header.Get("Lambda-Extension-Name"); name != "linkgate-extension" {
		f.fail(w, "Lambda-Extension-Name %q", name)
		return
	}
	var req struct{ Events []string }
	if err := json.Unmarshal(body, &req); err != nil {
		f.fail(w, "register body %q: %v", body, err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registered = append(f.registered, strings.Join(req.Events, ","))
	if len(f.registerErrors) > 0 {
		typ := f.registerErrors[0]
		f.registerErrors = f.registerErrors[1:]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"errorMessage":"not allowed","errorType":%q}`, typ)
		return
	}
	f.id = "7e0a7d6b-1b0e-4c9e-9e1a-3f5d0c6e2a11"
	w.Header().Set("Lambda-Extension-Identifier", f.id)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"functionName":"shortener","functionVersion":"$LATEST","handler":"bootstrap"}`)
}

func (f *fakeAPI) checkID(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	id := f.id
	f.mu.Unlock()
	if got := r.Header.Get("Lambda-Extension-Identifier"); id == "" || got != id {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"errorMessage":"bad id","errorType":"Extension.InvalidExtensionIdentifier"}`)
		f.t.Errorf("fake runtime API: %s with identifier %q, want %q", r.URL.Path, got, id)
		return false
	}
	return true
}

func (f *fakeAPI) subscribe(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Method != http.MethodPut || !f.checkID(w, r) {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		f.fail(w, "subscribe Content-Type %q", ct)
		return
	}
	var sub struct {
		SchemaVersion string
		Types         []string
		Buffering     struct{ MaxItems, MaxBytes, TimeoutMs int }
		Destination   struct {
			Protocol string
			URI      string
		}
	}
	if err := json.Unmarshal(body, &sub); err != nil {
		f.fail(w, "subscribe body %q: %v", body, err)
		return
	}
	b := sub.Buffering
	if strings.Join(sub.Types, ",") != "platform" || b.TimeoutMs < 25 || b.TimeoutMs > 100 ||
		b.MaxItems < 1000 || b.MaxItems > 10000 || b.MaxBytes < 262144 || b.MaxBytes > 1048576 || sub.Destination.Protocol != "HTTP" {
		f.fail(w, "subscription %s", body)
		return
	}
	u, err := url.Parse(sub.Destination.URI)
	if err != nil || u.Scheme != "http" || u.Hostname() != "sandbox.localdomain" || u.Port() == "" {
		f.fail(w, "destination URI %q", sub.Destination.URI)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.schemas = append(f.schemas, sub.SchemaVersion)
	f.listener = net.JoinHostPort("127.0.0.1", u.Port())
	switch {
	case f.telemetry == "notsupported":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"errorMessage":"Telemetry API is not supported","errorType":"Telemetry.NotSupported"}`)
	case f.telemetry == "validation-first" && len(f.schemas) == 1:
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"errorMessage":"schema","errorType":"ValidationError"}`)
	default:
		io.WriteString(w, "OK")
	}
}

// send queues an event for /event/next.
func (f *fakeAPI) send(ev string) { f.events <- ev }

func invokeEvent(id string) string {
	return fmt.Sprintf(`{"eventType":"INVOKE","deadlineMs":%d,"requestId":%q,"invokedFunctionArn":"arn:aws:lambda:us-east-1:123456789012:function:shortener","tracing":{"type":"X-Amzn-Trace-Id","value":"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=557abcec3ee5a047;Sampled=1"}}`,
		time.Now().Add(3*time.Second).UnixMilli(), id)
}

func shutdownEvent() string {
	return fmt.Sprintf(`{"eventType":"SHUTDOWN","shutdownReason":"spindown","deadlineMs":%d}`, time.Now().Add(2*time.Second).UnixMilli())
}

// waitNext waits until the extension has asked for event number n.
func (f *fakeAPI) waitNext(n int) {
	f.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-f.nextWaiting:
			if got >= n {
				return
			}
		case <-timeout:
			f.t.Fatalf("extension did not ask for event %d", n)
		}
	}
}

// deliver POSTs a telemetry batch to the extension's listener, as Lambda does.
func (f *fakeAPI) deliver(batch string) *http.Response {
	f.t.Helper()
	f.mu.Lock()
	addr := f.listener
	f.mu.Unlock()
	if addr == "" {
		f.t.Fatal("no telemetry subscription to deliver to")
	}
	resp, err := http.Post("http://"+addr+"/", "application/json", bytes.NewReader([]byte(batch)))
	if err != nil {
		f.t.Fatalf("deliver telemetry: %v", err)
	}
	resp.Body.Close()
	return resp
}

// telemetryFor returns a batch with the platform records of one invoke: it
// started at start, the runtime was done runtimeMs later, and the report
// follows (with initDurationMs on a cold start).
func telemetryFor(id string, start time.Time, runtimeMs float64, coldInitMs float64) string {
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	done := start.Add(time.Duration(runtimeMs * float64(time.Millisecond)))
	init := ""
	if coldInitMs > 0 {
		init = fmt.Sprintf(`,"initDurationMs":%g`, coldInitMs)
	}
	return fmt.Sprintf(`[
{"time":%q,"type":"platform.start","record":{"requestId":%q,"version":"$LATEST"}},
{"time":%q,"type":"platform.runtimeDone","record":{"requestId":%q,"status":"success","metrics":{"durationMs":%g,"producedBytes":42},"spans":[{"name":"responseLatency","start":%q,"durationMs":1.5}]}},
{"time":%q,"type":"platform.report","record":{"requestId":%q,"status":"success","metrics":{"durationMs":%g,"billedDurationMs":%d,"memorySizeMB":128,"maxMemoryUsedMB":31%s}}}
]`, ts(start), id, ts(done), id, runtimeMs, ts(start), ts(done), id, runtimeMs+0.2, int(runtimeMs+0.2)+1, init)
}
