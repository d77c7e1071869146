package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
)

// Reloader turns a store's updates into served configurations: it mirrors
// the store's entries, decodes and validates what changed (Config.Apply),
// compiles (Compile) and hands the result to load, which swaps it in.
//
// What it serves depends only on what is stored: a resource that fails
// validation, names a missing resource, uses a plugin linkgate does not
// have or panics while loading is left out — logged once (again only if
// the reason changes), counted by Skipped — and the rest serves. A panic
// anywhere in a reload (load included) is recovered, logged and counted
// (Panics); the last good configuration keeps serving, and the next
// update rebuilds everything from the mirrored entries, so one bad reload
// never makes the gateway drift from its store.
type Reloader struct {
	reg  *Registry
	log  *slog.Logger
	load func(*Compiled)

	mu       sync.Mutex
	raw      map[string]Entry // "kind/id" → entry, as the store delivered it
	revision int64
	cfg      *Config // decoded raw; nil after a failed reload
	compiled *Compiled
	reported map[string]*SkipError // skipped resources already logged
	panics   int64
}

// NewReloader returns a Reloader that hands each compiled configuration to
// load (typically the data plane's atomic swap).
func NewReloader(reg *Registry, logger *slog.Logger, load func(*Compiled)) *Reloader {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reloader{reg: reg, log: logger, load: load, raw: map[string]Entry{}, reported: map[string]*SkipError{}}
}

// Run feeds the store's updates to Update until ctx ends; onUpdate (may be
// nil) is called after each one.
func (r *Reloader) Run(ctx context.Context, s Store, onUpdate func()) error {
	return s.Watch(ctx, func(u Update) {
		r.Update(u)
		if onUpdate != nil {
			onUpdate()
		}
	})
}

// Update applies one store update. It reports whether the new
// configuration was loaded; false means the reload panicked and the
// previous configuration is still serving.
func (r *Reloader) Update(u Update) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Mirror the store first: plain map operations that cannot fail.
	if u.Reset {
		r.raw = make(map[string]Entry, len(u.Entries))
		r.revision = 0
	}
	for _, e := range u.Entries {
		r.raw[string(e.Kind)+"/"+e.ID] = e
	}
	for _, e := range u.Deleted {
		delete(r.raw, string(e.Kind)+"/"+e.ID)
	}
	r.revision = max(r.revision, u.Revision)
	return r.reload(u)
}

func (r *Reloader) reload(u Update) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			r.panics++
			r.cfg = nil // rebuild from the mirror next time
			r.log.Error("config reload panicked; the last good configuration keeps serving",
				"panic", fmt.Sprint(p), "revision", u.Revision, "stack", string(debug.Stack()))
			ok = false
		}
	}()
	var cfg *Config
	var applyErrs []error
	if r.cfg == nil || u.Reset {
		cfg = NewConfig()
		applyErrs = cfg.Apply(r.all(), r.reg)
	} else {
		cfg = r.cfg.Clone()
		applyErrs = cfg.Apply(u, r.reg)
		cfg.Revision = r.revision
	}
	compiled, compileErrs := Compile(cfg, r.reg)
	compiled.ModifiedIndexes = r.modifiedIndexes()
	r.load(compiled)
	r.cfg, r.compiled = cfg, compiled
	r.report(cfg, applyErrs, compileErrs)
	return true
}

// modifiedIndexes is the highest modifiedIndex of the mirror per kind.
func (r *Reloader) modifiedIndexes() map[Kind]int64 {
	out := make(map[Kind]int64, len(Kinds))
	for _, e := range r.raw {
		out[e.Kind] = max(out[e.Kind], e.ModifiedIndex)
	}
	return out
}

// all is the mirror as a Reset update, in key order.
func (r *Reloader) all() Update {
	u := Update{Reset: true, Revision: r.revision, Entries: make([]Entry, 0, len(r.raw))}
	for _, k := range slices.Sorted(maps.Keys(r.raw)) {
		u.Entries = append(u.Entries, r.raw[k])
	}
	return u
}

// report counts the panics of this reload and logs the resources that
// became skipped (or whose reason changed) and those that serve again.
func (r *Reloader) report(cfg *Config, applyErrs, compileErrs []error) {
	for _, err := range slices.Concat(applyErrs, compileErrs) {
		if se, ok := err.(*SkipError); ok && se.Reason == SkipPanic {
			r.panics++
		}
	}
	now := map[string]*SkipError{}
	for _, se := range cfg.Skipped() {
		now[se.Key] = se
	}
	for _, err := range compileErrs {
		if se, ok := err.(*SkipError); ok {
			now[se.Key] = se
		}
	}
	for _, k := range slices.Sorted(maps.Keys(now)) {
		se := now[k]
		if old, ok := r.reported[k]; ok && old.Error() == se.Error() {
			continue
		}
		attrs := []any{"key", k, "reason", se.Reason, "err", se.Err.Error()}
		if pe, ok := se.Err.(*PanicError); ok {
			attrs = append(attrs, "stack", string(pe.Stack))
		}
		r.log.Warn("resource skipped", attrs...)
	}
	for k := range r.reported {
		if _, ok := now[k]; !ok {
			r.log.Info("resource no longer skipped", "key", k)
		}
	}
	r.reported = now
}

// Compiled is the configuration loaded last (nil before the first update).
func (r *Reloader) Compiled() *Compiled {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.compiled
}

// Skipped counts the resources not served now, by reason.
func (r *Reloader) Skipped() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, se := range r.reported {
		out[se.Reason]++
	}
	return out
}

// SkippedResources lists the resources not served now and why.
func (r *Reloader) SkippedResources() []*SkipError {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*SkipError, 0, len(r.reported))
	for _, k := range slices.Sorted(maps.Keys(r.reported)) {
		out = append(out, r.reported[k])
	}
	return out
}

// Panics counts the panics recovered while reloading.
func (r *Reloader) Panics() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.panics
}
