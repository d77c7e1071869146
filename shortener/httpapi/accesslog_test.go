package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/accesslog"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// Every request through the server gets one access log line with what
// the client sent and what it was answered, those the server could not
// read included.
func TestAccessLog(t *testing.T) {
	var out bytes.Buffer
	log := accesslog.New(&out, accesslog.Options{Format: accesslog.JSON})
	s := start(t, setup{cfg: httpapi.Config{AccessLog: log}})
	created := s.do(t, "POST", "/shortenURL", `{"OriginalURL":"https://example.com/a"}`, "User-Agent", "curl/8")
	c := struct{ ID string }{wantSeedCreated(t, created, `https://example.com/a`)}
	hostile := "evil\" 200 0 \"-\" \"x\\"
	if r := s.do(t, "GET", "/"+c.ID+"?q=1", "", "User-Agent", hostile, "Referer", "https://r.example/\"p"); r.Status != 302 {
		t.Fatalf("redirect: %d", r.Status)
	}
	if r := s.do(t, "HEAD", "/"+c.ID, ""); r.Status != 302 {
		t.Fatalf("HEAD: %d", r.Status)
	}
	notFound := s.do(t, "GET", "/nosuchlink", "", "Accept", "text/html")
	if notFound.Status != 404 {
		t.Fatalf("unknown link: %d", notFound.Status)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if status, _ := bufio.NewReader(conn).ReadString('\n'); !strings.Contains(status, " 400 ") {
		t.Fatalf("malformed request: %q", status)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	type line struct {
		RemoteAddr string  `json:"remote_addr"`
		Method     string  `json:"method"`
		URI        string  `json:"uri"`
		Proto      string  `json:"proto"`
		Status     int     `json:"status"`
		Bytes      *int64  `json:"bytes"`
		Time       string  `json:"time"`
		Duration   float64 `json:"request_time"`
		Referer    string  `json:"referer"`
		UA         string  `json:"user_agent"`
	}
	var got []line
	dec := json.NewDecoder(&out)
	for dec.More() {
		var l line
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("%v in %s", err, out.String())
		}
		got = append(got, l)
	}
	n := func(v int64) *int64 { return &v }
	want := []struct {
		method, uri    string
		status         int
		bytes          *int64
		referer, agent string
	}{
		{"POST", "/shortenURL", 201, n(int64(len(created.Body))), "", "curl/8"},
		{"GET", "/" + c.ID + "?q=1", 302, n(0), "https://r.example/\"p", hostile},
		{"HEAD", "/" + c.ID, 302, n(0), "", "Go-http-client/1.1"},
		{"GET", "/nosuchlink", 404, n(int64(len(notFound.Body))), "", "Go-http-client/1.1"},
		{"", "", 400, nil, "", ""}, // not read: nothing of it is logged
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), out.String())
	}
	for i, w := range want {
		g := got[i]
		if g.Method != w.method || g.URI != w.uri || g.Status != w.status || g.Referer != w.referer || g.UA != w.agent ||
			g.RemoteAddr != "127.0.0.1" || g.Proto != "HTTP/1.1" && w.method != "" || g.Duration < 0 || g.Time == "" {
			t.Errorf("line %d: %+v, want %+v", i, g, w)
		}
		if w.bytes != nil && (g.Bytes == nil || *g.Bytes != *w.bytes) {
			t.Errorf("line %d: bytes %v, want %d", i, g.Bytes, *w.bytes)
		}
	}
}
