// Package accesslog writes one line per HTTP request, as nginx's
// access_log does with buffer= and flush=: the request's handler copies
// its fields into a buffer (Log, which never blocks on the output and
// never allocates), and one goroutine formats the lines and writes them
// through a bufio.Writer, flushed every FlushInterval, on Reopen and on
// Close.
//
// The buffer is two byte arenas of Options.BufferBytes each: handlers
// append raw records to one under a mutex while the writer formats the
// other. The writer swaps them when the one being filled is half full or
// at the flush tick. A record that does not fit in the arena being filled
// (the writer is behind: a slow disk, a full pipe) is dropped and counted
// (Stats.Dropped): a request is never held for its log line, as nginx
// holds a worker on a blocking write(2).
//
// Formats (Format): Combined, the Combined Log Format exactly as nginx
// writes it by default (escape=default) and JSON, one object per line.
package accesslog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Format is a line format.
type Format int

const (
	// Combined is the Combined Log Format, nginx's "combined":
	//
	//	$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"
	//
	// Bytes '"', '\\', below 0x20 and above 0x7e in the request line,
	// referrer and user agent are written \xXX (nginx's escape=default);
	// an empty referrer or user agent is "-", as is an unknown body size.
	Combined Format = iota
	// JSON is one JSON object per line: time (RFC 3339, microseconds),
	// remote_addr, method, uri, proto, host, status, bytes (null when
	// unknown), request_time (seconds, microseconds: nginx's
	// $request_time), referer, user_agent. Bytes that are not UTF-8 are
	// written as U+FFFD, as encoding/json does.
	JSON
)

// ParseFormat parses a format's name: combined or json.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "combined":
		return Combined, nil
	case "json":
		return JSON, nil
	}
	return 0, fmt.Errorf("access log format %q: want combined or json", s)
}

func (f Format) String() string {
	if f == JSON {
		return "json"
	}
	return "combined"
}

// Entry is one request as its handler saw it. Log copies it: its byte
// slices may alias the request's buffers.
type Entry struct {
	Time     time.Time     // when the answer was ready, or the request read (see Log.Timed)
	Duration time.Duration // from the request read to the answer ready; only with Timed
	Addr     netip.Addr    // the client's; invalid: unknown ("-")
	Method   []byte
	URI      []byte // as the request line gave it
	Proto    []byte // HTTP/1.1
	Host     []byte
	Referer  []byte
	UA       []byte
	Status   int
	Bytes    int64 // the answer's body; negative: unknown
}

// MaxField bounds each of an Entry's byte fields in a record: longer
// values are cut there (the server's request line and headers are
// bounded below it by --max-header-bytes' default).
const MaxField = 8 << 10

// Record layout in an arena: a fixed header, then the fields' bytes.
const (
	offTime   = 0  // int64 Unix nanoseconds
	offDur    = 8  // int64 nanoseconds
	offBytes  = 16 // int64, negative: unknown
	offStatus = 24 // uint16
	offAddr   = 26 // byte 0, 4 or 6, then 16 bytes
	offLens   = 43 // numFields × uint16
	numFields = 6
	headerLen = offLens + 2*numFields
)

// maxRecord is the largest record: the smallest buffer holds two.
const maxRecord = headerLen + numFields*MaxField

// Options configure a Log. Zero values take the defaults noted.
type Options struct {
	Format Format
	// BufferBytes is the size of each of the two arenas. Default
	// DefaultBufferBytes; at least 2 × the largest record.
	BufferBytes int
	// FlushInterval is how often buffered lines are written out: at most
	// this late. Default DefaultFlushInterval.
	FlushInterval time.Duration
	// Location is the time zone of the lines' times. Default time.Local,
	// as nginx's $time_local.
	Location *time.Location
	// Logger receives write and reopen errors. Default: discarded.
	Logger *slog.Logger
}

const (
	// DefaultBufferBytes holds about 2,000 requests of 256 bytes in each
	// arena: at 100,000 requests/s the writer is woken every 5 ms, and
	// may stall 10 ms before a line is dropped.
	DefaultBufferBytes = 512 << 10
	// DefaultFlushInterval is nginx's usual flush=1s.
	DefaultFlushInterval = time.Second
)

// Stats are a Log's counters since it was created.
type Stats struct {
	Lines       uint64 // formatted and handed to the output
	Dropped     uint64 // not logged: the buffer was full, or the Log closed
	WriteErrors uint64 // failed writes to the output (their lines are lost)
}

// Log is an access log. Create it with New or Open.
type Log struct {
	opts Options

	mu        sync.Mutex
	cur       []byte // the arena being filled
	signalled bool   // the writer was woken for cur
	closed    bool

	spare []byte // the writer's arena
	line  []byte // the writer's line buffer
	fm    formatter
	bw    *bufio.Writer
	out   io.Writer
	file  *os.File // out when it is a file Open opened; nil: not reopened or closed
	path  string
	fails bool // the last write failed: the next success is logged

	lines, dropped, writeErrs atomic.Uint64

	wake   chan struct{}
	reopen chan chan error
	quit   chan struct{}
	done   chan struct{}
}

// New returns a Log writing to w, which it never closes (stdout, stderr).
func New(w io.Writer, opts Options) *Log {
	return start(w, nil, "", opts)
}

// Open returns a Log appending to the file at path, created 0644 if
// missing. Reopen opens the path again (after logrotate renamed it);
// Close closes it.
func Open(path string, opts Options) (*Log, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	return start(f, f, path, opts), nil
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	return f, nil
}

func start(w io.Writer, f *os.File, path string, opts Options) *Log {
	if opts.BufferBytes == 0 {
		opts.BufferBytes = DefaultBufferBytes
	}
	opts.BufferBytes = max(opts.BufferBytes, 2*maxRecord)
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{
		opts:   opts,
		cur:    make([]byte, 0, opts.BufferBytes),
		spare:  make([]byte, 0, opts.BufferBytes),
		line:   make([]byte, 0, 1024),
		fm:     formatter{format: opts.Format, loc: opts.Location},
		bw:     bufio.NewWriterSize(w, 64<<10),
		out:    w,
		file:   f,
		path:   path,
		wake:   make(chan struct{}, 1),
		reopen: make(chan chan error),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go l.run()
	return l
}

// Log buffers e's line. It copies e and does not block on the output:
// with the buffer full, the line is dropped and counted.
func (l *Log) Log(e *Entry) {
	fields := [numFields][]byte{e.Method, e.URI, e.Proto, e.Host, e.Referer, e.UA}
	n := headerLen
	for i, f := range fields {
		if len(f) > MaxField {
			fields[i] = f[:MaxField]
		}
		n += len(fields[i])
	}
	l.mu.Lock()
	at := len(l.cur)
	if l.closed || at+n > cap(l.cur) {
		l.mu.Unlock()
		l.dropped.Add(1)
		return
	}
	l.cur = l.cur[:at+n]
	rec := l.cur[at : at+n]
	binary.LittleEndian.PutUint64(rec[offTime:], uint64(e.Time.UnixNano()))
	binary.LittleEndian.PutUint64(rec[offDur:], uint64(e.Duration))
	binary.LittleEndian.PutUint64(rec[offBytes:], uint64(e.Bytes))
	binary.LittleEndian.PutUint16(rec[offStatus:], uint16(min(max(e.Status, 0), 0xffff)))
	addr := e.Addr.Unmap()
	rec[offAddr] = 0
	switch {
	case addr.Is4():
		rec[offAddr] = 4
	case addr.Is6():
		rec[offAddr] = 6
	}
	a16 := addr.As16()
	copy(rec[offAddr+1:offLens], a16[:])
	p := headerLen
	for i, f := range fields {
		binary.LittleEndian.PutUint16(rec[offLens+2*i:], uint16(len(f)))
		p += copy(rec[p:], f)
	}
	wake := !l.signalled && len(l.cur) >= cap(l.cur)/2
	if wake {
		l.signalled = true
	}
	l.mu.Unlock()
	if wake {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// Reopen writes out what is buffered, then opens the file again at its
// path, so that after logrotate renamed it the lines go to a new file.
// Logs not on a file (New) do nothing. On error the old file is kept.
func (l *Log) Reopen() error {
	if l.file == nil {
		return nil
	}
	c := make(chan error, 1)
	select {
	case l.reopen <- c:
		return <-c
	case <-l.done:
		return errors.New("access log: closed")
	}
}

// Close writes out every line buffered, flushes the output, closes the
// file Open opened, and returns the first error closing it. Lines logged
// from now on are dropped.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.quit)
	<-l.done
	if l.file != nil {
		return l.file.Close()
	}
	return nil
}

// Timed reports whether the format writes how long a request took
// (JSON's request_time): without it, the caller need not read the clock
// when the answer is ready.
func (l *Log) Timed() bool { return l.opts.Format == JSON }

// Stats returns the Log's counters.
func (l *Log) Stats() Stats {
	return Stats{Lines: l.lines.Load(), Dropped: l.dropped.Load(), WriteErrors: l.writeErrs.Load()}
}

// run is the writer goroutine.
func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(l.opts.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-l.wake:
			l.drain()
		case <-tick.C:
			l.drain()
			l.flush()
		case c := <-l.reopen:
			l.drain()
			l.flush()
			if l.file == nil {
				c <- nil
			} else {
				c <- l.reopenFile()
			}
		case <-l.quit:
			l.drain()
			l.flush()
			return
		}
	}
}

// drain takes the arena being filled and writes its lines to the
// bufio.Writer.
func (l *Log) drain() {
	l.mu.Lock()
	full := l.cur
	l.cur, l.signalled = l.spare[:0], false
	l.mu.Unlock()
	for b := full; len(b) > 0; {
		var e Entry
		n, ok := decode(b, &e)
		if !ok {
			panic("accesslog: corrupt record") // written by Log alone
		}
		b = b[n:]
		l.line = l.fm.append(l.line[:0], &e)
		l.write(l.line)
	}
	l.spare = full
}

// write writes one line to the bufio.Writer. A failed write loses what
// the bufio.Writer held, which then starts afresh (it keeps an error
// forever otherwise).
func (l *Log) write(line []byte) {
	if _, err := l.bw.Write(line); err != nil {
		l.failed(err)
		return
	}
	l.lines.Add(1)
}

func (l *Log) flush() {
	if err := l.bw.Flush(); err != nil {
		l.failed(err)
		return
	}
	if l.fails {
		l.fails = false
		l.opts.Logger.Info("access log: writing again", "path", l.path)
	}
}

func (l *Log) failed(err error) {
	l.writeErrs.Add(1)
	if !l.fails {
		l.fails = true
		l.opts.Logger.Error("access log: write failed; lines are lost until it succeeds (linkgate_access_log_write_errors_total)", "path", l.path, "error", err)
	}
	l.bw.Reset(l.out)
}

// reopenFile opens the path again; called with the buffer flushed.
func (l *Log) reopenFile() error {
	f, err := openFile(l.path)
	if err != nil {
		l.opts.Logger.Error("access log: reopen failed; still writing to the file opened before", "path", l.path, "error", err)
		return err
	}
	old := l.file
	l.file, l.out = f, f
	l.bw.Reset(f)
	if err := old.Close(); err != nil {
		l.opts.Logger.Warn("access log: close the file before reopen", "path", l.path, "error", err)
	}
	return nil
}

// decode reads the record at the start of b into e, whose byte slices
// then alias b, and returns its length.
func decode(b []byte, e *Entry) (int, bool) {
	if len(b) < headerLen {
		return 0, false
	}
	n := headerLen
	var lens [numFields]int
	for i := range lens {
		lens[i] = int(binary.LittleEndian.Uint16(b[offLens+2*i:]))
		n += lens[i]
	}
	if n > len(b) {
		return 0, false
	}
	e.Time = time.Unix(0, int64(binary.LittleEndian.Uint64(b[offTime:])))
	e.Duration = time.Duration(binary.LittleEndian.Uint64(b[offDur:]))
	e.Bytes = int64(binary.LittleEndian.Uint64(b[offBytes:]))
	e.Status = int(binary.LittleEndian.Uint16(b[offStatus:]))
	a16 := [16]byte(b[offAddr+1 : offLens])
	switch b[offAddr] {
	case 4:
		e.Addr = netip.AddrFrom16(a16).Unmap()
	case 6:
		e.Addr = netip.AddrFrom16(a16) // zone dropped
	default:
		e.Addr = netip.Addr{}
	}
	p := headerLen
	fields := [numFields]*[]byte{&e.Method, &e.URI, &e.Proto, &e.Host, &e.Referer, &e.UA}
	for i, f := range fields {
		*f = b[p : p+lens[i] : p+lens[i]]
		p += lens[i]
	}
	return n, true
}
