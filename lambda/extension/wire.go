package extension

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// A minimal HTTP/1.1 message reader for the two local peers of an
// extension: the Extensions/Telemetry API (responses) and the Telemetry API
// deliveries (requests). net/http alone would put the stripped binary at
// about 6 MB and cost goroutine hand-offs per event; this costs neither. It
// understands Content-Length and chunked bodies, keep-alive and
// "Connection: close", and rejects everything else.

var (
	errHeaderTooLarge = errors.New("http: header line too long")
	errMalformed      = errors.New("http: malformed message")
	errBodyTooLarge   = errors.New("http: body too large")
)

// header is what the reader keeps of a message's header section.
type header struct {
	contentLength int64 // -1 when absent
	chunked       bool
	close         bool
	expect100     bool
	identifier    []byte // Lambda-Extension-Identifier (copied)
}

// readHeader reads header fields up to the empty line, keeping what header
// describes. http10 makes the connection non-persistent by default.
func readHeader(r *bufio.Reader, h *header, http10 bool) error {
	h.contentLength, h.chunked, h.close, h.expect100 = -1, false, http10, false
	h.identifier = h.identifier[:0]
	for {
		line, err := readLine(r)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || line[0] == ' ' || line[0] == '\t' || bytes.ContainsAny(line[:colon], " \t") {
			return errMalformed // includes obsolete line folding
		}
		name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || (h.contentLength >= 0 && h.contentLength != n) {
				return errMalformed
			}
			h.contentLength = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("chunked")) {
				return errMalformed
			}
			h.chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				h.close = true
			} else if bytes.EqualFold(value, []byte("keep-alive")) {
				h.close = false
			}
		case bytes.EqualFold(name, []byte("Expect")):
			h.expect100 = bytes.EqualFold(value, []byte("100-continue"))
		case bytes.EqualFold(name, []byte("Lambda-Extension-Identifier")):
			h.identifier = append(h.identifier, value...)
		}
	}
}

// readLine returns one CRLF- (or LF-) terminated line without its
// terminator. The slice is valid until the next read.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, errHeaderTooLarge
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// readBody appends the message body described by h to buf[:0] and returns
// it. untilEOF reads to the end of the connection when neither length nor
// chunking is given (responses only). Bodies over max are an error.
func readBody(r *bufio.Reader, h *header, buf []byte, max int, untilEOF bool) ([]byte, error) {
	buf = buf[:0]
	switch {
	case h.chunked:
		if h.contentLength >= 0 {
			return buf, errMalformed
		}
		for {
			line, err := readLine(r)
			if err != nil {
				return buf, err
			}
			if i := bytes.IndexByte(line, ';'); i >= 0 {
				line = line[:i] // chunk extensions
			}
			n, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 31)
			if err != nil {
				return buf, errMalformed
			}
			if n == 0 {
				for { // trailer section
					line, err := readLine(r)
					if err != nil {
						return buf, err
					}
					if len(line) == 0 {
						return buf, nil
					}
				}
			}
			if len(buf)+int(n) > max {
				return buf, errBodyTooLarge
			}
			if buf, err = readN(r, buf, int(n)); err != nil {
				return buf, err
			}
			if line, err := readLine(r); err != nil || len(line) != 0 {
				return buf, errMalformed
			}
		}
	case h.contentLength >= 0:
		if h.contentLength > int64(max) {
			return buf, errBodyTooLarge
		}
		return readN(r, buf, int(h.contentLength))
	case untilEOF:
		for {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if len(buf) > max {
				return buf, errBodyTooLarge
			}
			if err == io.EOF {
				return buf, nil
			}
			if err != nil {
				return buf, err
			}
		}
	}
	return buf, nil
}

// readN appends exactly n bytes from r to buf.
func readN(r *bufio.Reader, buf []byte, n int) ([]byte, error) {
	start := len(buf)
	buf = grow(buf, n)[:start+n]
	if _, err := io.ReadFull(r, buf[start:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf[:start], err
	}
	return buf, nil
}

// grow returns buf with room for n more bytes.
func grow(buf []byte, n int) []byte {
	if cap(buf)-len(buf) >= n {
		return buf
	}
	nb := make([]byte, len(buf), len(buf)+n+len(buf)/2)
	copy(nb, buf)
	return nb
}

// readStatusLine parses "HTTP/1.x NNN reason" and returns the status code
// and whether the protocol is HTTP/1.0.
func readStatusLine(r *bufio.Reader) (status int, http10 bool, err error) {
	line, err := readLine(r)
	if err != nil {
		return 0, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return 0, false, fmt.Errorf("%w: status line %q", errMalformed, truncate(line))
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, false, fmt.Errorf("%w: status line %q", errMalformed, truncate(line))
		}
		status = status*10 + int(c-'0')
	}
	return status, line[7] == '0', nil
}

// readRequestLine parses "METHOD target HTTP/1.x" and returns the method
// (valid until the next read) and whether the protocol is HTTP/1.0.
func readRequestLine(r *bufio.Reader) (method []byte, http10 bool, err error) {
	line, err := readLine(r)
	if err != nil {
		return nil, false, err
	}
	sp1 := bytes.IndexByte(line, ' ')
	sp2 := bytes.LastIndexByte(line, ' ')
	if sp1 <= 0 || sp2 <= sp1+1 {
		return nil, false, errMalformed
	}
	proto := line[sp2+1:]
	if len(proto) != 8 || !bytes.HasPrefix(proto, []byte("HTTP/1.")) || (proto[7] != '0' && proto[7] != '1') {
		return nil, false, errMalformed
	}
	return line[:sp1], proto[7] == '0', nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
