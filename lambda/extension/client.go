package extension

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkgate/linkgate/internal/jsonquote"
)

// API paths and headers (Extensions API 2020-01-01, Telemetry API 2022-07-01).
const (
	pathRegister  = "/2020-01-01/extension/register"
	pathNext      = "/2020-01-01/extension/event/next"
	pathInitError = "/2020-01-01/extension/init/error"
	pathExitError = "/2020-01-01/extension/exit/error"
	pathTelemetry = "/2022-07-01/telemetry"

	headerName       = "Lambda-Extension-Name"
	headerIdentifier = "Lambda-Extension-Identifier"
	headerErrorType  = "Lambda-Extension-Function-Error-Type"
)

// maxAPIBody bounds a response body from the Extensions API (an INVOKE
// event is a few hundred bytes).
const maxAPIBody = 1 << 20

// callTimeout bounds every API call except the blocking /event/next.
const callTimeout = 5 * time.Second

// ErrTelemetryNotSupported is returned by SubscribeTelemetry when the
// Runtime API answers that it has no Telemetry API, as the runtime
// interface emulator does (202 with errorType Telemetry.NotSupported).
var ErrTelemetryNotSupported = errors.New("telemetry API not supported by this runtime API")

// APIError is an error answer of the Extensions or Telemetry API.
type APIError struct {
	Op      string // "register", "next", …
	Status  int
	Type    string // errorType of the body, if any
	Message string // errorMessage of the body, if any
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s: status %d", e.Op, e.Status)
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// EventType is the type of an Extensions API event.
type EventType uint8

// Extensions API event types.
const (
	EventOther EventType = iota
	EventInvoke
	EventShutdown
)

func (t EventType) String() string {
	switch t {
	case EventInvoke:
		return "INVOKE"
	case EventShutdown:
		return "SHUTDOWN"
	}
	return "other"
}

// Event is one Extensions API event. Byte slices point into the client's
// buffer and are valid until the next call on the client.
type Event struct {
	Type           EventType
	RequestID      []byte // INVOKE
	DeadlineMs     int64  // epoch milliseconds
	ShutdownReason []byte // SHUTDOWN: spindown, timeout, failure (any case)
	Raw            []byte // the whole event body
}

// Deadline returns DeadlineMs as a time (zero when absent).
func (e *Event) Deadline() time.Time {
	if e.DeadlineMs <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(e.DeadlineMs)
}

// parseEvent decodes body into e.
func parseEvent(body []byte, e *Event, scratch *[]byte) error {
	*e = Event{Raw: body}
	it := iterate(body, 0)
	for it.next() {
		m := &it.m
		switch {
		case m.nameIs("eventType"):
			s, _ := m.str(scratch)
			switch string(s) {
			case "INVOKE":
				e.Type = EventInvoke
			case "SHUTDOWN":
				e.Type = EventShutdown
			default:
				e.Type = EventOther
			}
		case m.nameIs("requestId"):
			e.RequestID, _ = m.str(scratch)
		case m.nameIs("shutdownReason"):
			e.ShutdownReason, _ = m.str(scratch)
		case m.nameIs("deadlineMs"):
			f, _ := m.num()
			e.DeadlineMs = int64(f)
		}
	}
	if it.err != nil || !it.object {
		return fmt.Errorf("event: %w", errSyntax)
	}
	return nil
}

// Client speaks the Extensions API (and the Telemetry API subscription) over
// one keep-alive connection to AWS_LAMBDA_RUNTIME_API. It is not safe for
// concurrent use, except Close.
type Client struct {
	addr string // host:port

	mu     sync.Mutex // guards conn against Close
	conn   net.Conn
	closed atomic.Bool

	r       *bufio.Reader
	h       header
	req     []byte // request being written
	nextReq []byte // the /event/next request, built once
	body    []byte // last response body
	scratch []byte
	ev      Event

	id           string // Lambda-Extension-Identifier
	FunctionName string // from the register answer
	Version      string // function version, from the register answer
}

// NewClient returns a client for the Runtime API at addr (host:port, the
// value of AWS_LAMBDA_RUNTIME_API). It connects on first use.
func NewClient(addr string) *Client {
	return &Client{addr: addr}
}

// ID returns the extension identifier Register obtained.
func (c *Client) ID() string { return c.id }

// Close closes the connection, unblocking a pending Next; the client is
// unusable afterwards. Safe to call from another goroutine.
func (c *Client) Close() error {
	c.closed.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		return c.conn.Close()
	}
	return nil
}

func (c *Client) dial() error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	conn, err := net.DialTimeout("tcp", c.addr, callTimeout)
	if err != nil {
		return err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		conn.Close()
		return net.ErrClosed
	}
	c.conn = conn
	if c.r == nil {
		c.r = bufio.NewReaderSize(conn, 4096)
	} else {
		c.r.Reset(conn)
	}
	return nil
}

func (c *Client) dropConn() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// startRequest begins a request in c.req.
func (c *Client) startRequest(method, path string) {
	c.req = append(c.req[:0], method...)
	c.req = append(c.req, ' ')
	c.req = append(c.req, path...)
	c.req = append(c.req, " HTTP/1.1\r\nHost: "...)
	c.req = append(c.req, c.addr...)
	c.req = append(c.req, "\r\n"...)
}

func (c *Client) addHeader(name, value string) {
	c.req = append(c.req, name...)
	c.req = append(c.req, ": "...)
	c.req = append(c.req, value...)
	c.req = append(c.req, "\r\n"...)
}

// finishRequest ends the header section and appends a JSON body.
func (c *Client) finishRequest(body []byte) {
	if body != nil {
		c.req = append(c.req, "Content-Type: application/json\r\nContent-Length: "...)
		c.req = strconv.AppendInt(c.req, int64(len(body)), 10)
		c.req = append(c.req, "\r\n"...)
	}
	c.req = append(c.req, "\r\n"...)
	c.req = append(c.req, body...)
}

// roundTrip sends req and reads the response into c.h and c.body. A
// keep-alive connection the server dropped while idle is redialled once.
// sent, if not nil, is called once the request is written.
func (c *Client) roundTrip(req []byte, timeout time.Duration, sent func(time.Time)) (int, error) {
	for attempt := 0; ; attempt++ {
		reused := c.conn != nil
		if !reused {
			if err := c.dial(); err != nil {
				return 0, err
			}
		}
		var deadline time.Time
		if timeout > 0 {
			deadline = time.Now().Add(timeout)
		}
		_ = c.conn.SetDeadline(deadline)
		_, err := c.conn.Write(req)
		if err == nil && sent != nil {
			sent(time.Now())
		}
		if err == nil {
			_, err = c.r.Peek(1)
		}
		if err != nil {
			c.dropConn()
			if reused && attempt == 0 && !c.closed.Load() {
				continue
			}
			return 0, err
		}
		status, http10, err := readStatusLine(c.r)
		if err == nil {
			err = readHeader(c.r, &c.h, http10)
		}
		if err == nil {
			c.body, err = readBody(c.r, &c.h, c.body, maxAPIBody, true)
		}
		if err != nil || c.h.close || (c.h.contentLength < 0 && !c.h.chunked) {
			c.dropConn()
		}
		return status, err
	}
}

// apiError builds an APIError from the last response.
func (c *Client) apiError(op string, status int) *APIError {
	e := &APIError{Op: op, Status: status}
	it := iterate(c.body, 0)
	for it.next() {
		m := &it.m
		switch {
		case m.nameIs("errorType"):
			e.Type = m.text(&c.scratch)
		case m.nameIs("errorMessage"):
			e.Message = m.text(&c.scratch)
		}
	}
	return e
}

// Register registers the extension under name (which must equal its file
// name in /opt/extensions) for the given events ("INVOKE", "SHUTDOWN").
func (c *Client) Register(ctx context.Context, name string, events ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body := []byte(`{"events":[`)
	for i, e := range events {
		if i > 0 {
			body = append(body, ',')
		}
		body = jsonquote.Append(body, e)
	}
	body = append(body, "]}"...)
	c.startRequest("POST", pathRegister)
	c.addHeader(headerName, name)
	c.finishRequest(body)
	status, err := c.roundTrip(c.req, callTimeout, nil)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if status != 200 {
		return c.apiError("register", status)
	}
	if len(c.h.identifier) == 0 {
		return fmt.Errorf("register: no %s in the answer", headerIdentifier)
	}
	c.id = string(c.h.identifier)
	it := iterate(c.body, 0)
	for it.next() {
		switch m := &it.m; {
		case m.nameIs("functionName"):
			c.FunctionName = m.text(&c.scratch)
		case m.nameIs("functionVersion"):
			c.Version = m.text(&c.scratch)
		}
	}
	c.startRequest("GET", pathNext)
	c.addHeader(headerIdentifier, c.id)
	c.finishRequest(nil)
	c.nextReq = append(c.nextReq[:0], c.req...)
	return nil
}

// Next asks for the next event, blocks until it comes and returns it. The
// event is valid until the next call on c. sent, if not nil, is called with
// the time the request went out — the moment Lambda counts the extension
// ready (on a retry after a dropped connection, it is called again). Next
// allocates nothing in the steady state.
func (c *Client) Next(sent func(at time.Time)) (*Event, error) {
	if c.id == "" {
		return nil, errors.New("next: not registered")
	}
	status, err := c.roundTrip(c.nextReq, 0, sent)
	if err != nil {
		return nil, fmt.Errorf("next: %w", err)
	}
	if status != 200 {
		return nil, c.apiError("next", status)
	}
	c.scratch = c.scratch[:0]
	if err := parseEvent(c.body, &c.ev, &c.scratch); err != nil {
		return nil, fmt.Errorf("next: %w", err)
	}
	return &c.ev, nil
}

// InitError reports a failed initialisation; Lambda then fails the init
// phase. errorType is like "Extension.ConfigInvalid".
func (c *Client) InitError(ctx context.Context, errorType string, err error) error {
	return c.reportError(ctx, "init error", pathInitError, errorType, err)
}

// ExitError reports an error before the extension exits.
func (c *Client) ExitError(ctx context.Context, errorType string, err error) error {
	return c.reportError(ctx, "exit error", pathExitError, errorType, err)
}

func (c *Client) reportError(ctx context.Context, op, path, errorType string, cause error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body := append([]byte(`{"errorMessage":`), jsonquote.Append(nil, cause.Error())...)
	body = append(body, `,"errorType":`...)
	body = jsonquote.Append(body, errorType)
	body = append(body, '}')
	c.startRequest("POST", path)
	c.addHeader(headerIdentifier, c.id)
	c.addHeader(headerErrorType, errorType)
	c.finishRequest(body)
	status, err := c.roundTrip(c.req, callTimeout, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if status/100 != 2 {
		return c.apiError(op, status)
	}
	return nil
}

// TelemetrySubscription describes a Telemetry API subscription.
type TelemetrySubscription struct {
	SchemaVersion string   // e.g. "2025-01-29"
	Types         []string // e.g. ["platform"]
	MaxItems      int
	MaxBytes      int
	TimeoutMs     int
	URI           string // http://sandbox.localdomain:PORT
}

// SubscribeTelemetry subscribes to the Telemetry API. It returns
// ErrTelemetryNotSupported when the Runtime API has no Telemetry API.
func (c *Client) SubscribeTelemetry(ctx context.Context, s TelemetrySubscription) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body := append([]byte(`{"schemaVersion":`), jsonquote.Append(nil, s.SchemaVersion)...)
	body = append(body, `,"types":[`...)
	for i, t := range s.Types {
		if i > 0 {
			body = append(body, ',')
		}
		body = jsonquote.Append(body, t)
	}
	body = append(body, `],"buffering":{"maxItems":`...)
	body = strconv.AppendInt(body, int64(s.MaxItems), 10)
	body = append(body, `,"maxBytes":`...)
	body = strconv.AppendInt(body, int64(s.MaxBytes), 10)
	body = append(body, `,"timeoutMs":`...)
	body = strconv.AppendInt(body, int64(s.TimeoutMs), 10)
	body = append(body, `},"destination":{"protocol":"HTTP","URI":`...)
	body = jsonquote.Append(body, s.URI)
	body = append(body, "}}"...)
	c.startRequest("PUT", pathTelemetry)
	c.addHeader(headerIdentifier, c.id)
	c.finishRequest(body)
	status, err := c.roundTrip(c.req, callTimeout, nil)
	if err != nil {
		return fmt.Errorf("subscribe telemetry: %w", err)
	}
	if status/100 != 2 {
		return c.apiError("subscribe telemetry", status)
	}
	// The emulator's stub answers 202 with an error body: not a subscription.
	if e := c.apiError("subscribe telemetry", status); e.Type != "" {
		if e.Type == "Telemetry.NotSupported" {
			return ErrTelemetryNotSupported
		}
		return e
	}
	return nil
}
