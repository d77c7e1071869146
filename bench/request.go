package bench

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Requester makes the requests of one worker thread. A worker calls it only
// from its own goroutine, so implementations need no locking.
type Requester interface {
	// Request appends the bytes of the next request (or of several
	// pipelined requests) to dst and returns the extended slice, like the
	// strconv.Append functions.
	Request(dst []byte) ([]byte, error)
}

// Responder is implemented by Requesters that want every response, like a
// wrk script that defines response(). Parsing headers and bodies for it costs
// time, so only Requesters that need it should implement it.
type Responder interface {
	Response(r *Response) error
}

// Fixed is implemented by Requesters whose request never changes: the worker
// sends the same bytes again and again without calling anything, which is
// the allocation-free path (wrk's "static" scripts).
type Fixed interface {
	Fixed() []byte
}

// Static is a fixed request.
type Static []byte

// Request appends the fixed request bytes to dst.
func (s Static) Request(dst []byte) ([]byte, error) { return append(dst, s...), nil }

// Fixed returns the request bytes.
func (s Static) Fixed() []byte { return s }

// Fields is an ordered list of header fields for FormatRequest.
type Fields []Field

// Field is one header name and value.
type Field struct{ Name, Value string }

// Get returns the value of the first field named name (any case).
func (f Fields) Get(name string) (string, bool) {
	for _, h := range f {
		if strings.EqualFold(h.Name, name) {
			return h.Value, true
		}
	}
	return "", false
}

// Set replaces the first field named name (any case) or appends one.
func (f Fields) Set(name, value string) Fields {
	for i, h := range f {
		if strings.EqualFold(h.Name, name) {
			f[i].Value = value
			return f
		}
	}
	return append(f, Field{name, value})
}

// ParseHeader reads a -H argument, "Name: value".
func ParseHeader(s string) (Field, error) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") || strings.ContainsAny(value, "\r\n") {
		return Field{}, fmt.Errorf("invalid header %q (want \"Name: value\")", s)
	}
	return Field{name, strings.TrimSpace(value)}, nil
}

// AppendRequest appends an HTTP/1.1 request to dst, as wrk.format does: the
// request line, Host first, the other fields in order, Content-Length when
// there is a body (replacing any given one), a blank line and the body.
func AppendRequest(dst []byte, method, path string, headers Fields, body []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\n"...)
	if host, ok := headers.Get("Host"); ok {
		dst = appendField(dst, "Host", host)
	}
	for _, h := range headers {
		if strings.EqualFold(h.Name, "Host") || strings.EqualFold(h.Name, "Content-Length") {
			continue
		}
		dst = appendField(dst, h.Name, h.Value)
	}
	if body != nil {
		dst = append(dst, "Content-Length: "...)
		dst = strconv.AppendInt(dst, int64(len(body)), 10)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

func appendField(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// HostHeader is the Host value wrk sends for a URL host and port: the port is
// included only when the URL had one.
func HostHeader(host, port string) string {
	if port == "" {
		return host
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + port
}

// requestInfo checks request bytes the way a server would frame them and
// returns how many requests they hold (more than one means pipelining) and
// whether the first is a HEAD request, whose response has no body.
func requestInfo(b []byte) (count int, head bool, err error) {
	if len(b) == 0 {
		return 0, false, errors.New("empty request")
	}
	head = bytes.HasPrefix(b, []byte("HEAD "))
	for len(b) > 0 {
		end := bytes.Index(b, []byte("\r\n\r\n"))
		if end < 0 {
			return 0, false, errors.New("request has no end of headers (\\r\\n\\r\\n)")
		}
		lines := bytes.Split(b[:end], []byte("\r\n"))
		if f := bytes.Fields(lines[0]); len(f) != 3 || !bytes.HasPrefix(f[2], []byte("HTTP/1.")) {
			return 0, false, fmt.Errorf("malformed request line %q", lines[0])
		}
		var length int64
		for _, l := range lines[1:] {
			name, value, ok := bytes.Cut(l, []byte(":"))
			if !ok {
				return 0, false, fmt.Errorf("malformed header line %q", l)
			}
			if asciiEqualFold(bytes.TrimSpace(name), "content-length") {
				n, ok := parseLength(bytes.TrimSpace(value))
				if !ok {
					return 0, false, fmt.Errorf("malformed Content-Length %q", value)
				}
				length = n
			}
			if asciiEqualFold(bytes.TrimSpace(name), "transfer-encoding") {
				return 0, false, errors.New("chunked request bodies are not supported; set Content-Length")
			}
		}
		b = b[end+4:]
		if int64(len(b)) < length {
			return 0, false, fmt.Errorf("request body shorter than its Content-Length %d", length)
		}
		b = b[length:]
		count++
	}
	return count, head, nil
}

// requestCloses reports whether the last request in b asks the server to
// close the connection after its response (Connection: close): the
// generator then opens a new connection for the next request, as wrk does.
func requestCloses(b []byte) bool {
	closes := false
	for len(b) > 0 {
		end := bytes.Index(b, []byte("\r\n\r\n"))
		if end < 0 {
			return closes
		}
		closes = false
		var length int64
		for _, l := range bytes.Split(b[:end], []byte("\r\n"))[1:] {
			name, value, _ := bytes.Cut(l, []byte(":"))
			switch {
			case asciiEqualFold(bytes.TrimSpace(name), "connection"):
				closes = closes || hasToken(value, "close")
			case asciiEqualFold(bytes.TrimSpace(name), "content-length"):
				length, _ = parseLength(bytes.TrimSpace(value))
			}
		}
		b = b[min(int64(len(b)), int64(end+4)+length):]
	}
	return closes
}

// appendUnique appends to dst the decimal digits of n, padded to width with
// zeros; scenarios use it to make unique URLs without allocating.
func appendUnique(dst []byte, n uint64, width int) []byte {
	var buf [20]byte
	s := strconv.AppendUint(buf[:0], n, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}
