package accesslog

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	tz   = time.FixedZone("", -7*3600)
	when = time.Date(2026, 12, 7, 12, 30, 55, 123456789, time.UTC)
)

// entry is a redirect as a browser sends it.
func entry() Entry {
	return Entry{
		Time: when, Duration: 123456 * time.Nanosecond, Addr: netip.MustParseAddr("203.0.113.7"),
		Method: []byte("GET"), URI: []byte("/abc?utm_source=mail"), Proto: []byte("HTTP/1.1"), Host: []byte("sho.rt"),
		Referer: []byte("https://news.example.com/item?id=1"), UA: []byte("Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0"),
		Status: 302, Bytes: 0,
	}
}

// Lines as nginx writes them (log_format combined, escape=default) and
// the JSON format's, through Log: the record's copy, the writer's format.
func TestLines(t *testing.T) {
	tests := []struct {
		name           string
		edit           func(*Entry)
		combined, json string
	}{
		{"redirect", func(*Entry) {},
			`203.0.113.7 - - [07/Dec/2026:05:30:55 -0700] "GET /abc?utm_source=mail HTTP/1.1" 302 0 "https://news.example.com/item?id=1" "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0"`,
			`{"time":"2026-12-07T05:30:55.123456-07:00","remote_addr":"203.0.113.7","method":"GET","uri":"/abc?utm_source=mail","proto":"HTTP/1.1","host":"sho.rt","status":302,"bytes":0,"request_time":0.000123,"referer":"https://news.example.com/item?id=1","user_agent":"Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0"}`},
		{"no referrer nor user agent, IPv6, a body", func(e *Entry) {
			e.Referer, e.UA, e.Addr, e.Method, e.URI, e.Status, e.Bytes = nil, nil, netip.MustParseAddr("2001:db8::1"), []byte("POST"), []byte("/api/v1/links"), 201, 87
		},
			`2001:db8::1 - - [07/Dec/2026:05:30:55 -0700] "POST /api/v1/links HTTP/1.1" 201 87 "-" "-"`,
			`{"time":"2026-12-07T05:30:55.123456-07:00","remote_addr":"2001:db8::1","method":"POST","uri":"/api/v1/links","proto":"HTTP/1.1","host":"sho.rt","status":201,"bytes":87,"request_time":0.000123,"referer":"","user_agent":""}`},
		{"hostile user agent: quotes, backslash, newline, NUL, DEL", func(e *Entry) {
			e.UA = []byte("x\" 200 0 \"-\" \"forged\\\n127.0.0.1 - - [\x00\x7f")
		},
			`203.0.113.7 - - [07/Dec/2026:05:30:55 -0700] "GET /abc?utm_source=mail HTTP/1.1" 302 0 "https://news.example.com/item?id=1" "x\x22 200 0 \x22-\x22 \x22forged\x5C\x0A127.0.0.1 - - [\x00\x7F"`,
			`{"time":"2026-12-07T05:30:55.123456-07:00","remote_addr":"203.0.113.7","method":"GET","uri":"/abc?utm_source=mail","proto":"HTTP/1.1","host":"sho.rt","status":302,"bytes":0,"request_time":0.000123,"referer":"https://news.example.com/item?id=1","user_agent":"x\" 200 0 \"-\" \"forged\\\n127.0.0.1 - - [\u0000\u007f"}`},
		{"referrer and path: UTF-8, bytes not UTF-8, U+2028, tab", func(e *Entry) {
			e.Referer = []byte("https://exämple.com/\xff\xfe\u2028")
			e.URI = []byte("/a\"b\tc\\d")
		},
			`203.0.113.7 - - [07/Dec/2026:05:30:55 -0700] "GET /a\x22b\x09c\x5Cd HTTP/1.1" 302 0 "https://ex\xC3\xA4mple.com/\xFF\xFE\xE2\x80\xA8" "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0"`,
			`{"time":"2026-12-07T05:30:55.123456-07:00","remote_addr":"203.0.113.7","method":"GET","uri":"/a\"b\tc\\d","proto":"HTTP/1.1","host":"sho.rt","status":302,"bytes":0,"request_time":0.000123,"referer":"https://exämple.com/\ufffd\ufffd\u2028","user_agent":"Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0"}`},
		{"unreadable request: no request line, no address, size unknown", func(e *Entry) {
			*e = Entry{Time: when, Status: 400, Bytes: -1, Duration: 2 * time.Second}
		},
			`- - - [07/Dec/2026:05:30:55 -0700] "-" 400 - "-" "-"`,
			`{"time":"2026-12-07T05:30:55.123456-07:00","remote_addr":"","method":"","uri":"","proto":"","host":"","status":400,"bytes":null,"request_time":2.000000,"referer":"","user_agent":""}`},
		{"HTTP/0.9-like line without protocol; IPv4-mapped address", func(e *Entry) {
			e.Proto, e.Addr = nil, netip.MustParseAddr("::ffff:192.0.2.1")
		},
			`192.0.2.1 - - [07/Dec/2026:05:30:55 -0700] "GET /abc?utm_source=mail" 302 0 "https://news.example.com/item?id=1" "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0"`,
			`{"time":"2026-12-07T05:30:55.123456-07:00","remote_addr":"192.0.2.1","method":"GET","uri":"/abc?utm_source=mail","proto":"","host":"sho.rt","status":302,"bytes":0,"request_time":0.000123,"referer":"https://news.example.com/item?id=1","user_agent":"Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0"}`},
	}
	for _, tt := range tests {
		for _, f := range []Format{Combined, JSON} {
			t.Run(tt.name+"/"+f.String(), func(t *testing.T) {
				e := entry()
				tt.edit(&e)
				var out bytes.Buffer
				l := New(&out, Options{Format: f, Location: tz})
				l.Log(&e)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				want := tt.combined
				if f == JSON {
					want = tt.json
					if !json.Valid([]byte(want)) {
						t.Fatalf("the test's own line is not JSON: %s", want)
					}
				}
				if got := out.String(); got != want+"\n" {
					t.Errorf("got  %s\nwant %s", got, want)
				}
				if s := l.Stats(); s != (Stats{Lines: 1}) {
					t.Errorf("stats %+v", s)
				}
			})
		}
	}
}

// The writer keeps the last second's time text: lines within a second,
// across seconds, across an offset change and back in time are each what
// a fresh formatter writes.
func TestTimeText(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	dst := time.Date(2026, 3, 8, 6, 59, 59, 999_999_000, time.UTC) // 01:59:59.999999 EST, then 03:00 EDT
	times := []time.Time{dst, dst.Add(time.Microsecond), dst.Add(time.Second), when, when.Add(999 * time.Millisecond), when.Add(time.Second), when.Add(-time.Hour)}
	for _, f := range []Format{Combined, JSON} {
		var out bytes.Buffer
		l := New(&out, Options{Format: f, Location: ny})
		var want []byte
		for _, at := range times {
			e := entry()
			e.Time = at
			l.Log(&e)
			want = f.Append(want, &e, ny)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if out.String() != string(want) {
			t.Errorf("%v:\ngot\n%s\nwant\n%s", f, out.String(), want)
		}
		if f == Combined && !strings.Contains(string(want), "[08/Mar/2026:01:59:59 -0500]") || f == Combined && !strings.Contains(string(want), "[08/Mar/2026:03:00:00 -0400]") {
			t.Errorf("the offset change is not in the lines:\n%s", want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Format
		ok   bool
	}{{"combined", Combined, true}, {"json", JSON, true}, {"common", 0, false}, {"", 0, false}, {"JSON", 0, false}} {
		got, err := ParseFormat(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseFormat(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// Every line logged before Close is written, from many goroutines at
// once, each whole on its own line. The arena holds every record (each
// under 256 bytes), so none is dropped however late the writer runs: with
// the default arena a busy machine's writer fell behind the 8 goroutines
// and 309 of 4,000 were dropped, as designed (CI, session E).
func TestCloseWritesEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := Open(path, Options{BufferBytes: 8000 * 256})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				e := entry()
				e.URI = fmt.Appendf(nil, "/g%d/%d", g, i)
				l.Log(&e)
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seen := readLines(t, path)
	s := l.Stats()
	if len(seen) != goroutines*each || s.Lines != goroutines*each || s.Dropped != 0 {
		t.Fatalf("%d distinct lines in the file, stats %+v; want %d, none dropped", len(seen), s, goroutines*each)
	}
	e := entry()
	l.Log(&e)
	if l.Stats().Dropped != 1 {
		t.Errorf("a line logged after Close: stats %+v, want it dropped", l.Stats())
	}
}

// readLines returns the file's request URIs, failing on a line that
// does not parse or on a path seen twice.
func readLines(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := combinedLine.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("not a combined line: %q", sc.Text())
		}
		uri := strings.Fields(m[3])[1]
		if seen[uri] {
			t.Fatalf("line twice: %q", sc.Text())
		}
		seen[uri] = true
	}
	return seen
}

// logrotate's flow: the file is renamed, SIGHUP makes the server open the
// path again. Lines before the reopen are in the renamed file, every one
// after it in the new file.
func TestReopenAfterRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	l, err := Open(path, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	logN := func(prefix string, n int) {
		for i := range n {
			e := entry()
			e.URI = fmt.Appendf(nil, "/%s%d", prefix, i)
			l.Log(&e)
		}
	}
	logN("before", 100)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	logN("between", 10) // after the rename, before the reopen: the old file
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	logN("after", 50)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	old, cur := readLines(t, path+".1"), readLines(t, path)
	if len(old) != 110 || !old["/before0"] || !old["/between9"] || len(cur) != 50 || !cur["/after0"] || !cur["/after49"] {
		t.Errorf("renamed file: %d lines, new file: %d; want 110 and 50", len(old), len(cur))
	}
	// A reopen that fails keeps the file open before.
	l2, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := l2.Reopen(); err == nil {
		t.Error("reopen onto a directory: no error")
	}
	e := entry()
	l2.Log(&e)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if s := l2.Stats(); s.Lines != 1 || s.WriteErrors != 0 {
		t.Errorf("after a failed reopen: %+v, want the line written to the file before", s)
	}
}

// blockingWriter blocks every Write until released.
type blockingWriter struct {
	release chan struct{}
	entered chan struct{}
	out     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return w.out.Write(p)
}

// With the output stuck, Log neither blocks nor grows: lines beyond the
// buffer are dropped and counted, and every line counted as written is.
func TestFullBufferDrops(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	l := New(w, Options{BufferBytes: 1}) // the smallest buffer: two records of the largest size
	ua := bytes.Repeat([]byte("u"), 1<<10)
	const total = 2000
	for i := range total {
		e := entry()
		e.UA = ua
		e.URI = fmt.Appendf(nil, "/%d", i)
		l.Log(&e)
		if i == 100 {
			<-w.entered // the writer is stuck in Write with its 64 KiB
		}
	}
	s := l.Stats()
	if s.Dropped == 0 {
		t.Fatalf("stats %+v: nothing dropped with the output stuck", s)
	}
	close(w.release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s = l.Stats()
	lines := bytes.Count(w.out.Bytes(), []byte("\n"))
	if s.Lines+s.Dropped != total || uint64(lines) != s.Lines {
		t.Errorf("stats %+v, %d lines written; want lines + dropped = %d", s, lines, total)
	}
}

// failingWriter fails while fail is set.
type failingWriter struct {
	fail bool
	out  bytes.Buffer
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.fail {
		return 0, io.ErrShortWrite
	}
	return w.out.Write(p)
}

// A failed write is counted, and the lines after it are written once the
// output takes them again (a bufio.Writer alone would fail forever).
func TestWriteErrorRecovers(t *testing.T) {
	w := &failingWriter{fail: true}
	path := filepath.Join(t.TempDir(), "x")
	l := New(w, Options{})
	l.path = path
	e := entry()
	l.Log(&e)
	l.reopenFlush(t)
	w.fail = false
	e.URI = []byte("/second")
	l.Log(&e)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.WriteErrors != 1 || !strings.Contains(w.out.String(), "/second") || strings.Count(w.out.String(), "\n") != 1 {
		t.Errorf("stats %+v, output %q", s, w.out.String())
	}
}

// reopenFlush drains and flushes through the writer goroutine (a Log
// without a file has no reopen of its own: this sends the request).
func (l *Log) reopenFlush(t *testing.T) {
	t.Helper()
	c := make(chan error, 1)
	l.reopen <- c
	<-c
}

// Log allocates nothing: it is on the redirect's path.
func TestLogAllocs(t *testing.T) {
	l := New(io.Discard, Options{})
	defer l.Close()
	e := entry()
	if n := testing.AllocsPerRun(1000, func() { l.Log(&e) }); n != 0 {
		t.Errorf("Log: %v allocs per call", n)
	}
	var b []byte
	for _, f := range []Format{Combined, JSON} {
		fm := formatter{format: f, loc: tz}
		b = fm.append(b[:0], &e)
		if n := testing.AllocsPerRun(1000, func() { e.Time = e.Time.Add(time.Second); b = fm.append(b[:0], &e) }); n != 0 {
			t.Errorf("%v: %v allocs per line", f, n)
		}
	}
}

func BenchmarkLog(b *testing.B) {
	l := New(io.Discard, Options{})
	defer l.Close()
	e := entry()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Log(&e)
		}
	})
}

func BenchmarkFormat(b *testing.B) {
	for _, f := range []Format{Combined, JSON} {
		b.Run(f.String(), func(b *testing.B) {
			e := entry()
			buf := make([]byte, 0, 1024)
			fm := formatter{format: f, loc: time.Local}
			b.ReportAllocs()
			for b.Loop() {
				buf = fm.append(buf[:0], &e)
			}
		})
	}
}

// combinedLine parses a combined line: address, time, request, status,
// bytes, referrer, user agent; quoted fields hold no raw '"' nor '\\'.
var combinedLine = regexp.MustCompile(`^(\S+) - - \[(\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [-+]\d{4})\] "((?:[^"\\]|\\x[0-9A-F]{2})*)" (\d+) (\d+|-) "((?:[^"\\]|\\x[0-9A-F]{2})*)" "((?:[^"\\]|\\x[0-9A-F]{2})*)"$`)

// unescapeCLF undoes appendCLF.
func unescapeCLF(t *testing.T, s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			d, err := hex.DecodeString(s[i+2 : i+4])
			if err != nil {
				t.Fatal(err)
			}
			b.Write(d)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Whatever a client sends, a combined line is one line that parses back
// to what was sent, and a JSON line is one JSON object whose strings are
// what was sent (bytes not UTF-8 as U+FFFD, as encoding/json has them).
func FuzzFormat(f *testing.F) {
	f.Add([]byte("GET"), []byte("/abc"), []byte("https://r.example/"), []byte("Mozilla/5.0"))
	f.Add([]byte("G\"T"), []byte("/\x00\n\\x22"), []byte("\xff\xfe\u2028"), []byte("\" 200 0 \"-\" \"x"))
	f.Fuzz(func(t *testing.T, method, uri, referer, ua []byte) {
		e := entry()
		e.Method, e.URI, e.Referer, e.UA = method, uri, referer, ua
		line := Combined.Append(nil, &e, tz)
		if bytes.IndexByte(line, '\n') != len(line)-1 {
			t.Fatalf("not one line: %q", line)
		}
		m := combinedLine.FindStringSubmatch(string(line[:len(line)-1]))
		if m == nil {
			t.Fatalf("does not parse: %q", line)
		}
		wantReq := string(method) + " " + string(uri) + " HTTP/1.1" // never "-": Proto is set
		orDash := func(b []byte) string {
			if len(b) == 0 {
				return "-"
			}
			return string(b)
		}
		if got := unescapeCLF(t, m[3]); got != wantReq {
			t.Errorf("request %q, want %q", got, wantReq)
		}
		if got := unescapeCLF(t, m[6]); got != orDash(referer) {
			t.Errorf("referrer %q, want %q", got, referer)
		}
		if got := unescapeCLF(t, m[7]); got != orDash(ua) {
			t.Errorf("user agent %q, want %q", got, ua)
		}

		line = JSON.Append(nil, &e, tz)
		if bytes.IndexByte(line, '\n') != len(line)-1 {
			t.Fatalf("not one line: %q", line)
		}
		var got struct{ Method, URI, Referer, UserAgent string }
		dec := json.NewDecoder(bytes.NewReader(line))
		if err := dec.Decode(&struct {
			Method    *string `json:"method"`
			URI       *string `json:"uri"`
			Referer   *string `json:"referer"`
			UserAgent *string `json:"user_agent"`
		}{&got.Method, &got.URI, &got.Referer, &got.UserAgent}); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		utf := func(b []byte) string { return string([]rune(string(b))) }
		if got.Method != utf(method) || got.URI != utf(uri) || got.Referer != utf(referer) || got.UserAgent != utf(ua) {
			t.Errorf("decoded %+v from %s", got, line)
		}
	})
}
