// Package batch is APISIX's batch processor (apisix/utils/batch-processor
// and its manager) for the logger plugins: entries are buffered per
// plugin configuration and handed to a send function in batches of
// batch_max_size, or when no entry came for inactive_timeout seconds, or
// buffer_duration seconds after the batch's first entry; a failed batch is
// sent again max_retry_count times, retry_delay seconds apart, then
// dropped. Pushing never blocks: while more than max pending entries
// (all processors of a Manager together) wait to be sent, new entries are
// dropped and counted.
package batch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a processor's settings, as APISIX's batch processor schema.
type Config struct {
	Name            string `json:"name"`
	BatchMaxSize    int    `json:"batch_max_size"`
	InactiveTimeout int    `json:"inactive_timeout"` // seconds
	BufferDuration  int    `json:"buffer_duration"`  // seconds
	MaxRetryCount   int    `json:"max_retry_count"`
	RetryDelay      int    `json:"retry_delay"` // seconds
}

// Defaults are APISIX's (Name is the plugin's).
func Defaults(name string) Config {
	return Config{Name: name, BatchMaxSize: 1000, InactiveTimeout: 5, BufferDuration: 60, RetryDelay: 1}
}

// Clock is what a processor waits with; tests inject their own.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine after d.
	AfterFunc(d time.Duration, f func())
}

type realClock struct{}

func (realClock) Now() time.Time                      { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

// DefaultMaxPending is APISIX's max_pending_entries default.
const DefaultMaxPending = 8192

// staleAfter is how long an idle processor is kept (APISIX's 1800 s).
const staleAfter = 30 * time.Minute

// SendFunc sends one batch; batchMaxSize is the processor's setting
// (APISIX's loggers encode a batch of size 1 as a single object).
type SendFunc func(ctx context.Context, entries [][]byte, batchMaxSize int) error

// Manager holds a plugin's processors, one per configuration key, and
// bounds what they hold together.
type Manager struct {
	log        *slog.Logger
	clock      Clock
	maxPending atomic.Int64
	pending    atomic.Int64 // pushed, not yet sent nor dropped
	dropped    atomic.Int64

	mu    sync.Mutex
	procs map[string]*Processor
}

// NewManager returns a manager; clock nil is the real one, maxPending 0
// is DefaultMaxPending.
func NewManager(log *slog.Logger, clock Clock, maxPending int) *Manager {
	if clock == nil {
		clock = realClock{}
	}
	if maxPending <= 0 {
		maxPending = DefaultMaxPending
	}
	m := &Manager{log: log, clock: clock, procs: map[string]*Processor{}}
	m.maxPending.Store(int64(maxPending))
	return m
}

// SetMaxPending changes the bound (APISIX's plugin metadata
// max_pending_entries); 0 is DefaultMaxPending.
func (m *Manager) SetMaxPending(n int) {
	if n <= 0 {
		n = DefaultMaxPending
	}
	m.maxPending.Store(int64(n))
}

// Pending counts the entries pushed and not yet sent or dropped.
func (m *Manager) Pending() int64 { return m.pending.Load() }

// Dropped counts the entries dropped because too many were pending.
func (m *Manager) Dropped() int64 { return m.dropped.Load() }

// Processor returns key's processor, made with c and send if there is
// none; processors idle for 30 minutes are dropped meanwhile (an
// instance still holding one gets a new one on its next push).
func (m *Manager) Processor(key string, c Config, send SendFunc) *Processor {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	for k, p := range m.procs {
		p.mu.Lock()
		if len(p.buf) == 0 && now.Sub(p.last) > staleAfter {
			p.closed = true
			delete(m.procs, k)
		}
		p.mu.Unlock()
	}
	if p := m.procs[key]; p != nil {
		return p
	}
	p := &Processor{m: m, key: key, c: c, send: send, last: now}
	m.procs[key] = p
	return p
}

// Processor buffers one configuration's entries.
type Processor struct {
	m    *Manager
	key  string
	c    Config
	send SendFunc

	mu           sync.Mutex
	buf          [][]byte
	first, last  time.Time
	timerRunning bool
	closed       bool
}

// Push adds an entry (kept: the caller must not change it) and reports
// whether it was taken: false when too many entries are pending (it is
// dropped and counted). It never blocks on sending.
func (p *Processor) Push(entry []byte) bool {
	m := p.m
	if m.pending.Add(1) > m.maxPending.Load() {
		m.pending.Add(-1)
		m.dropped.Add(1)
		return false
	}
	for {
		p.mu.Lock()
		if !p.closed {
			break
		}
		p.mu.Unlock()
		p = m.Processor(p.key, p.c, p.send)
	}
	if p.c.BatchMaxSize == 1 {
		p.last = m.clock.Now()
		p.mu.Unlock()
		go p.process([][]byte{entry})
		return true
	}
	now := m.clock.Now()
	p.buf = append(p.buf, entry)
	if len(p.buf) == 1 {
		p.first = now
	}
	p.last = now
	var full [][]byte
	if len(p.buf) >= p.c.BatchMaxSize {
		full, p.buf = p.buf, nil
	}
	if !p.timerRunning {
		p.timerRunning = true
		m.clock.AfterFunc(time.Duration(p.c.InactiveTimeout)*time.Second, p.tick)
	}
	p.mu.Unlock()
	if full != nil {
		go p.process(full)
	}
	return true
}

// tick is APISIX's flush_buffer: the buffer goes when it has been
// inactive for inactive_timeout or held for buffer_duration; else the
// timer runs again.
func (p *Processor) tick() {
	now := p.m.clock.Now()
	p.mu.Lock()
	if now.Sub(p.last) < time.Duration(p.c.InactiveTimeout)*time.Second &&
		now.Sub(p.first) < time.Duration(p.c.BufferDuration)*time.Second {
		p.m.clock.AfterFunc(time.Duration(p.c.InactiveTimeout)*time.Second, p.tick)
		p.mu.Unlock()
		return
	}
	batch := p.buf
	p.buf = nil
	p.timerRunning = false
	p.mu.Unlock()
	if len(batch) > 0 {
		p.process(batch)
	}
}

// process sends a batch; a failed one is sent again retry_delay seconds
// later (on the clock's timer, holding no goroutine meanwhile) up to
// max_retry_count times, then dropped.
func (p *Processor) process(batch [][]byte) { p.attempt(batch, 0) }

func (p *Processor) attempt(batch [][]byte, try int) {
	err := p.send(context.Background(), batch, p.c.BatchMaxSize)
	if err != nil {
		p.m.log.Error("batch processor failed to process entries", "name", p.c.Name, "entries", len(batch), "err", err)
		if try < p.c.MaxRetryCount {
			p.m.clock.AfterFunc(time.Duration(p.c.RetryDelay)*time.Second, func() { p.attempt(batch, try+1) })
			return
		}
		p.m.log.Error("batch processor exceeded the max_retry_count, dropping the entries", "name", p.c.Name, "max_retry_count", p.c.MaxRetryCount, "entries", len(batch))
	}
	p.m.pending.Add(-int64(len(batch)))
}
