package bench

import (
	"errors"
	"testing"
)

type parsed struct {
	status int
	close  bool
	body   string
	used   int
}

// parseAll feeds data to a parser in pieces of size step (0: all at once)
// and returns the first complete response.
func parseAll(data []byte, head bool, step int) (parsed, error) {
	p := parser{capture: true}
	p.reset(head)
	if step <= 0 {
		step = len(data)
	}
	used := 0
	for used < len(data) {
		end := min(used+step, len(data))
		n, done, err := p.feed(data[used:end])
		used += n
		if err != nil {
			return parsed{}, err
		}
		if done {
			return parsed{p.status, p.close, string(p.body), used}, nil
		}
	}
	done, err := p.eof()
	if err != nil {
		return parsed{}, err
	}
	if !done {
		return parsed{}, errTruncated
	}
	return parsed{p.status, p.close, string(p.body), used}, nil
}

func TestParser(t *testing.T) {
	tests := []struct {
		name string
		in   string
		head bool
		want parsed
		err  error
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, parsed{200, false, "hello", 43}, nil},
		{"no reason phrase", "HTTP/1.1 204\r\n\r\n", false, parsed{204, false, "", 16}, nil},
		{"redirect no body", "HTTP/1.1 302 Found\r\nLocation: https://x/\r\nContent-Length: 0\r\n\r\n", false, parsed{302, false, "", 65}, nil},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: 1\r\n\r\n", false, parsed{200, false, "hello world", 88}, nil},
		{"close delimited", "HTTP/1.1 200 OK\r\n\r\nuntil close", false, parsed{200, true, "until close", 30}, nil},
		{"http/1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false, parsed{200, true, "ok", 40}, nil},
		{"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", false, parsed{200, false, "ok", 64}, nil},
		{"connection close", "HTTP/1.1 404 Not Found\r\nconnection: Close\r\ncontent-length: 1\r\n\r\nx", false, parsed{404, true, "x", 61}, nil},
		{"head has no body", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", true, parsed{200, false, "", 40}, nil},
		{"100 continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}", false, parsed{201, false, "{}", 68}, nil},
		{"bare LF lines", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", false, parsed{200, false, "ok", 37}, nil},
		{"garbage", "SSH-2.0-OpenSSH\r\n", false, parsed{}, errBadStatus},
		{"bad code", "HTTP/1.1 2x0 OK\r\n\r\n", false, parsed{}, errBadStatus},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, parsed{}, errBadLength},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", false, parsed{}, errBadLength},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false, parsed{}, errBadChunk},
		{"no colon", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", false, parsed{}, errBadHeader},
		{"truncated", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok", false, parsed{}, errTruncated},
		{"switching protocols", "HTTP/1.1 101 Switching\r\n\r\n", false, parsed{}, errBadStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, step := range []int{0, 1, 2, 7} {
				got, err := parseAll([]byte(tt.in), tt.head, step)
				if !errors.Is(err, tt.err) {
					t.Fatalf("step %d: err %v, want %v", step, err, tt.err)
				}
				tt.want.used = len(tt.in) // each input is exactly one response
				if err == nil && got != tt.want {
					t.Fatalf("step %d: got %+v, want %+v", step, got, tt.want)
				}
			}
		})
	}
}

func TestParserPipelined(t *testing.T) {
	in := []byte("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 503 No\r\nContent-Length: 1\r\n\r\nb")
	var p parser
	p.reset(false)
	var statuses []int
	for len(in) > 0 {
		n, done, err := p.feed(in)
		if err != nil {
			t.Fatal(err)
		}
		in = in[n:]
		if done {
			statuses = append(statuses, p.status)
			p.reset(false)
		}
	}
	if len(statuses) != 2 || statuses[0] != 200 || statuses[1] != 503 {
		t.Errorf("statuses %v", statuses)
	}
}

func TestParserCapturesHeaders(t *testing.T) {
	p := parser{capture: true}
	p.reset(false)
	in := "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-A:  b \r\nContent-Length: 2\r\n\r\n{}"
	if _, done, err := p.feed([]byte(in)); err != nil || !done {
		t.Fatal(done, err)
	}
	r := p.response()
	if r.Status != 201 || string(r.Body) != "{}" || len(r.Headers) != 3 ||
		string(r.Headers[1].Name) != "X-A" || string(r.Headers[1].Value) != "b" {
		t.Errorf("response %+v", r)
	}
}

func TestParserDoesNotAllocate(t *testing.T) {
	in := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok")
	var p parser
	allocs := testing.AllocsPerRun(100, func() {
		p.reset(false)
		if _, done, err := p.feed(in); !done || err != nil {
			t.Fatal(done, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per response", allocs)
	}
}

// FuzzParser checks that the parser never panics and that how the input is
// split across reads never changes the result.
func FuzzParser(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nbody",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		whole, errWhole := parseAll(data, false, 0)
		split, errSplit := parseAll(data, false, int(step%16)+1)
		if (errWhole == nil) != (errSplit == nil) || (errWhole == nil && whole != split) {
			t.Fatalf("whole: %+v %v; split by %d: %+v %v", whole, errWhole, step%16+1, split, errSplit)
		}
	})
}
