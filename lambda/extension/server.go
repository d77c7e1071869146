package extension

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// TelemetryServer receives Telemetry API deliveries (HTTP POSTs of JSON
// batches) and hands each body to Handle. Anything that is not a well-formed
// POST with a body Handle accepts is junk: counted, answered with a 4xx and
// otherwise ignored.
type TelemetryServer struct {
	// Handle processes one delivery; an error marks it junk. Calls may run
	// concurrently (one per connection). The body is reused afterwards.
	Handle func(body []byte) error
	// MaxBody bounds a delivery (Lambda sends up to about 2×maxBytes).
	MaxBody int
	// MaxConns bounds concurrent connections; more are closed at once.
	MaxConns int
	// OnJunk, if set, is called for each rejected request or connection.
	OnJunk func()

	ln         net.Listener
	deliveries atomic.Int64
	junk       atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// requestTimeout bounds reading one request once its first byte arrived.
const requestTimeout = 10 * time.Second

var (
	resp100 = []byte("HTTP/1.1 100 Continue\r\n\r\n")
	resp200 = []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	resp400 = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	resp405 = []byte("HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	resp413 = []byte("HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	resp431 = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
)

// Deliveries returns how many deliveries Handle accepted.
func (s *TelemetryServer) Deliveries() int64 { return s.deliveries.Load() }

// Junk returns how many requests or connections were rejected as junk.
func (s *TelemetryServer) Junk() int64 { return s.junk.Load() }

// Serve accepts connections on ln until Close. It returns nil after Close.
func (s *TelemetryServer) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.ln = ln
	if s.conns == nil {
		s.conns = make(map[net.Conn]struct{})
	}
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		s.mu.Lock()
		if s.closed || (s.MaxConns > 0 && len(s.conns) >= s.MaxConns) {
			s.mu.Unlock()
			s.countJunk()
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// Close stops accepting, closes every connection and waits for handlers.
func (s *TelemetryServer) Close() error {
	s.mu.Lock()
	s.closed = true
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *TelemetryServer) serveConn(c net.Conn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	r := bufio.NewReaderSize(c, 4096)
	var h header
	var body []byte
	for {
		if _, err := r.Peek(1); err != nil {
			return // closed while idle
		}
		_ = c.SetReadDeadline(time.Now().Add(requestTimeout))
		method, http10, err := readRequestLine(r)
		if err != nil {
			s.reject(c, err)
			return
		}
		post := string(method) == "POST"
		if err := readHeader(r, &h, http10); err != nil {
			s.reject(c, err)
			return
		}
		if h.expect100 && post {
			if _, err := c.Write(resp100); err != nil {
				return
			}
		}
		if !post {
			s.countJunk()
			c.Write(resp405)
			return
		}
		body, err = readBody(r, &h, body, s.MaxBody, false)
		if err != nil {
			s.reject(c, err)
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		if err := s.Handle(body); err != nil {
			s.countJunk()
			c.Write(resp400)
			return
		}
		s.deliveries.Add(1)
		if cap(body) > 1<<20 {
			body = nil // do not keep a rare large buffer alive
		}
		if _, err := c.Write(resp200); err != nil || h.close {
			return
		}
	}
}

func (s *TelemetryServer) countJunk() {
	s.junk.Add(1)
	if s.OnJunk != nil {
		s.OnJunk()
	}
}

// reject answers a malformed request and counts it.
func (s *TelemetryServer) reject(c net.Conn, err error) {
	s.countJunk()
	switch {
	case errors.Is(err, errHeaderTooLarge):
		c.Write(resp431)
	case errors.Is(err, errBodyTooLarge):
		c.Write(resp413)
	case errors.Is(err, errMalformed):
		c.Write(resp400)
	}
	// Timeouts and broken connections get no answer.
}
