package bench

import (
	"bytes"
	"errors"
)

// Response is one parsed response as a Responder sees it. Its slices are only
// valid during the call.
type Response struct {
	Status  int
	Headers []Header
	Body    []byte
}

// Header is one header field of a request or response.
type Header struct {
	Name, Value []byte
}

// Parser states.
const (
	stStatus = iota
	stHeader
	stBody
	stChunkSize
	stChunkData
	stChunkEnd
	stTrailer
	stUntilClose
)

// maxLine bounds a status line, header line or chunk-size line.
const maxLine = 16 << 10

var (
	errBadStatus   = errors.New("malformed status line")
	errBadHeader   = errors.New("malformed header line")
	errBadLength   = errors.New("malformed Content-Length")
	errBadChunk    = errors.New("malformed chunk")
	errLineTooLong = errors.New("response line too long")
	errTruncated   = errors.New("connection closed mid-response")
)

// parser is the minimal incremental HTTP/1.x response parser of the
// generator: status code, framing (Content-Length, chunked, read-until-close)
// and keep-alive, nothing else unless capture is on. It does not allocate
// once its line buffer has grown, which happens only for lines split across
// reads.
type parser struct {
	state     int
	head      bool // response to HEAD: no body
	status    int
	http10    bool
	keepAlive bool // an explicit Connection: keep-alive
	close     bool // the server will close the connection after this response
	chunked   bool
	length    int64 // Content-Length, -1 when absent
	remain    int64 // body or chunk bytes still to read
	line      []byte

	// capture makes the parser keep headers and body for a Responder.
	capture bool
	hbuf    []byte
	hidx    [][4]int
	body    []byte
	res     Response
}

// reset prepares the parser for the next response; head says the request was
// a HEAD request.
func (p *parser) reset(head bool) {
	p.state, p.head, p.status = stStatus, head, 0
	p.http10, p.keepAlive, p.close, p.chunked = false, false, false, false
	p.length, p.remain = -1, 0
	p.line = p.line[:0]
	if p.capture {
		p.hbuf, p.hidx, p.body = p.hbuf[:0], p.hidx[:0], p.body[:0]
	}
}

// feed consumes bytes of the response stream. It returns how many bytes it
// used and whether a response is complete; after a complete response the
// caller resets the parser before feeding the rest.
func (p *parser) feed(b []byte) (n int, done bool, err error) {
	for n < len(b) {
		switch p.state {
		case stBody, stChunkData:
			k := int64(len(b) - n)
			if k > p.remain {
				k = p.remain
			}
			if p.capture {
				p.body = append(p.body, b[n:n+int(k)]...)
			}
			n += int(k)
			p.remain -= k
			if p.remain > 0 {
				return n, false, nil
			}
			if p.state == stBody {
				return n, true, nil
			}
			p.state = stChunkEnd
		case stUntilClose:
			if p.capture {
				p.body = append(p.body, b[n:]...)
			}
			return len(b), false, nil
		default:
			line, used, ok, err := p.nextLine(b[n:])
			n += used
			if err != nil {
				return n, false, err
			}
			if !ok {
				return n, false, nil
			}
			done, err := p.onLine(line)
			if err != nil || done {
				return n, done, err
			}
		}
	}
	return n, false, nil
}

// eof tells the parser the connection closed. It completes a response that is
// delimited by the close and reports an error for any other partial response.
func (p *parser) eof() (done bool, err error) {
	if p.state == stUntilClose {
		return true, nil
	}
	return false, errTruncated
}

// nextLine returns the next line without its CR LF, joining pieces split
// across reads in p.line.
func (p *parser) nextLine(b []byte) (line []byte, used int, ok bool, err error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(p.line)+len(b) > maxLine {
			return nil, len(b), false, errLineTooLong
		}
		p.line = append(p.line, b...)
		return nil, len(b), false, nil
	}
	line = b[:i]
	if len(p.line) > 0 {
		if len(p.line)+i > maxLine {
			return nil, i + 1, false, errLineTooLong
		}
		p.line = append(p.line, line...)
		line = p.line
		p.line = p.line[:0]
	}
	if k := len(line); k > 0 && line[k-1] == '\r' {
		line = line[:k-1]
	}
	return line, i + 1, true, nil
}

func (p *parser) onLine(line []byte) (done bool, err error) {
	switch p.state {
	case stStatus:
		return false, p.statusLine(line)
	case stHeader:
		if len(line) == 0 {
			return p.endHeaders()
		}
		return false, p.header(line)
	case stChunkSize:
		return false, p.chunkSize(line)
	case stChunkEnd:
		if len(line) != 0 {
			return false, errBadChunk
		}
		p.state = stChunkSize
	case stTrailer:
		if len(line) == 0 {
			return true, nil
		}
	}
	return false, nil
}

func (p *parser) statusLine(line []byte) error {
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return errBadStatus
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return errBadStatus
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return errBadStatus
	}
	p.status, p.http10, p.state = code, line[7] == '0', stHeader
	return nil
}

func (p *parser) header(line []byte) error {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return errBadHeader
	}
	name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
	switch {
	case asciiEqualFold(name, "content-length"):
		n, ok := parseLength(value)
		if !ok || (p.length >= 0 && p.length != n) {
			return errBadLength
		}
		p.length = n
	case asciiEqualFold(name, "transfer-encoding"):
		p.chunked = hasToken(value, "chunked")
	case asciiEqualFold(name, "connection"):
		if hasToken(value, "close") {
			p.close = true
		}
		if hasToken(value, "keep-alive") {
			p.keepAlive = true
		}
	}
	if p.capture {
		start := len(p.hbuf)
		p.hbuf = append(p.hbuf, name...)
		mid := len(p.hbuf)
		p.hbuf = append(p.hbuf, value...)
		p.hidx = append(p.hidx, [4]int{start, mid, mid, len(p.hbuf)})
	}
	return nil
}

func (p *parser) endHeaders() (done bool, err error) {
	if p.http10 && !p.keepAlive {
		p.close = true
	}
	switch {
	case p.status < 200 && p.status != 101:
		// 100 Continue and other interim responses: the real one follows.
		head := p.head
		p.reset(head)
		return false, nil
	case p.status == 101:
		return false, errBadStatus
	case p.head || p.status == 204 || p.status == 304:
		return true, nil
	case p.chunked:
		p.state = stChunkSize
	case p.length == 0:
		return true, nil
	case p.length > 0:
		p.state, p.remain = stBody, p.length
	default:
		p.state, p.close = stUntilClose, true
	}
	return false, nil
}

func (p *parser) chunkSize(line []byte) error {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || len(line) > 15 {
		return errBadChunk
	}
	var n int64
	for _, c := range line {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c|0x20 >= 'a' && c|0x20 <= 'f':
			d = c | 0x20 - 'a' + 10
		default:
			return errBadChunk
		}
		n = n<<4 | int64(d)
	}
	if n == 0 {
		p.state = stTrailer
		return nil
	}
	p.state, p.remain = stChunkData, n
	return nil
}

// response returns the captured response; valid until the next reset.
func (p *parser) response() *Response {
	p.res.Status, p.res.Body = p.status, p.body
	p.res.Headers = p.res.Headers[:0]
	for _, ix := range p.hidx {
		p.res.Headers = append(p.res.Headers, Header{Name: p.hbuf[ix[0]:ix[1]], Value: p.hbuf[ix[2]:ix[3]]})
	}
	return &p.res
}

func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// asciiEqualFold reports whether b equals the lower-case ASCII string s,
// ignoring case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated list v contains token,
// ignoring case.
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		if asciiEqualFold(bytes.TrimSpace(item), token) {
			return true
		}
	}
	return false
}
