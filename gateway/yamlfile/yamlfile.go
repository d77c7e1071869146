// Package yamlfile is a gateway.Store on one YAML file in APISIX's
// standalone layout (linkgate gateway --config-store file:apisix.yaml),
// for GitOps: the file is the source of truth; the admin API reads it and
// replaces it only whole (PUT /apisix/admin/configs), never a resource.
//
// The layout is APISIX 2.14's conf/apisix.yaml: top-level lists routes,
// services, upstreams, consumers, plugin_configs, global_rules and ssl,
// each item a resource as the admin API takes it, and a last line #END
// (written last, so a half-written file is never loaded). An item's id is
// its id field, or "<kind>#<position>" (1-based) as APISIX names it; a
// consumer's is its username (a credential's, its id: jack/credentials/a).
//
// The file is read again when its content changes; a change is a Reset
// update of the whole configuration, which the gateway validates entry by
// entry with the admin API's code (gateway.Check through the Reloader): an
// invalid resource is skipped, logged and counted, the rest serves. A file
// that does not parse, is not the layout or lacks #END is not loaded at
// all: the last good configuration keeps serving and the error is logged
// once per content.
//
// The file is polled (its content every Interval), not watched with
// inotify: polling sees every way a file gets replaced — an editor's
// rename, a Kubernetes ConfigMap's symlink swap, a bind mount — and costs
// one read of a small file a second.
//
// APISIX 3.x's API-driven standalone mode writes the same file: Replace
// (PUT /apisix/admin/configs) applies its <key>_conf_version rules,
// writes the file atomically and hands the new configuration to the
// watchers before it returns (standalone.go).
package yamlfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/linkgate/linkgate/gateway"
)

// ErrReadOnly is returned by every write of one resource: the file is
// the configuration, replaced whole by Replace.
var ErrReadOnly = errors.New("the configuration is a YAML file (--config-store file:): the admin API replaces it only whole, by PUT /apisix/admin/configs")

// Interval is how often Watch looks at the file by default.
const Interval = time.Second

// Store serves the last good content of one file.
type Store struct {
	path     string
	log      *slog.Logger
	interval time.Duration

	// wmu orders the loads and their deliveries: the poller's and
	// Replace's never interleave.
	wmu      sync.Mutex
	watchers map[int]func(gateway.Update) // of the running Watch calls
	nextW    int
	fs       fileSystem // Replace's writes

	mu      sync.Mutex
	raw     []byte                   // the content loaded (or last refused)
	good    []byte                   // the content served
	entries map[string]gateway.Entry // "kind/id" → entry, last good content
	rev     int64                    // bumped at each good load
	lastErr error                    // why the current content is not loaded
}

var _ gateway.Store = (*Store)(nil)

// Open loads path; a file that is not loadable is an error here (a gateway
// should not start on it), later only a logged one.
func Open(path string, logger *slog.Logger, interval time.Duration) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = Interval
	}
	s := &Store{path: path, log: logger, interval: interval, entries: map[string]gateway.Entry{},
		watchers: map[int]func(gateway.Update){}, fs: osFS{}}
	if _, err := s.refresh(); err != nil {
		return nil, err
	}
	return s, nil
}

// Err is why the file's current content is not the one served (nil when
// it is).
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// refresh reads the file and loads it if it changed; it reports whether
// the served configuration changed.
func (s *Store) refresh() (bool, error) {
	b, err := os.ReadFile(s.path)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.lastErr == nil || s.lastErr.Error() != err.Error() {
			s.lastErr = err
			s.raw = nil
			return false, err
		}
		return false, nil
	}
	if bytes.Equal(b, s.raw) {
		return false, nil
	}
	s.raw = b
	entries, err := Parse(b)
	if err != nil {
		s.lastErr = fmt.Errorf("%s: %w", s.path, err)
		return false, s.lastErr
	}
	s.loadLocked(b, entries)
	return true, nil
}

// loadLocked serves b, parsed into entries; s.mu is held.
func (s *Store) loadLocked(b []byte, entries map[string]gateway.Entry) {
	s.raw, s.good = b, b
	s.lastErr = nil
	s.rev++
	for k, e := range entries {
		// An unchanged resource keeps its index (and with it its place
		// in sources and per-resource state).
		if old, ok := s.entries[k]; ok && bytes.Equal(old.Value, e.Value) {
			e.CreatedIndex, e.ModifiedIndex = old.CreatedIndex, old.ModifiedIndex
		} else {
			e.CreatedIndex, e.ModifiedIndex = s.rev, s.rev
			if ok {
				e.CreatedIndex = old.CreatedIndex
			}
		}
		entries[k] = e
	}
	s.entries = entries
}

var endFlag = regexp.MustCompile(`#END\s*$`)

// kinds are the top-level keys loaded, with APISIX's names.
var kinds = map[string]gateway.Kind{
	"routes": gateway.KindRoute, "services": gateway.KindService, "upstreams": gateway.KindUpstream,
	"consumers": gateway.KindConsumer, "plugin_configs": gateway.KindPluginConfig,
	"consumer_groups": gateway.KindConsumerGroup, "plugin_metadata": gateway.KindPluginMetadata,
	"global_rules": gateway.KindGlobalRule, "ssl": gateway.KindSSL, "ssls": gateway.KindSSL, "stream_routes": gateway.KindStreamRoute,
}

// Parse decodes a file's content into entries by "kind/id", unvalidated
// (values are JSON, as the admin API stores them). Top-level keys other
// than the resource lists are errors, so a typo never silently drops a
// section.
func Parse(b []byte) (map[string]gateway.Entry, error) {
	if !endFlag.Match(b) {
		return nil, errors.New("missing the end flag #END on the last line (a file still being written?)")
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	if _, ok := doc["ssl"]; ok && doc["ssls"] != nil {
		return nil, errors.New("both ssl (APISIX 2.x) and ssls (3.x): keep one")
	}
	out := map[string]gateway.Entry{}
	for _, key := range slices.Sorted(maps.Keys(doc)) {
		if err := checkMetaKey(key, doc[key]); err != errNotMeta {
			if err != nil {
				return nil, err
			}
			continue
		}
		kind, ok := kinds[key]
		if !ok {
			return nil, fmt.Errorf("unknown top-level key %q (want routes, services, upstreams, consumers, consumer_groups, plugin_configs, plugin_metadata, global_rules, ssls or stream_routes)", key)
		}
		if doc[key] == nil {
			continue
		}
		items, ok := doc[key].([]any)
		if !ok {
			return nil, fmt.Errorf("%s: want a list of resources", key)
		}
		for i, item := range items {
			m, ok := gateway.StringKeys(item).(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s[%d]: want a resource (a mapping)", key, i+1)
			}
			delete(m, "modifiedIndex") // APISIX 3.x's standalone change marker, not the resource's
			value, err := json.Marshal(m)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", key, i+1, err)
			}
			// The id as the admin API reads it from a body (1 and 1.0 are "1").
			decoded, err := gateway.DecodeJSON(value)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", key, i+1, err)
			}
			fields, _ := decoded.(map[string]any)
			id := key + "#" + strconv.Itoa(i+1)
			credID, _ := fields["id"].(string)
			if _, _, cred := gateway.ParseCredentialKey(credID); cred && kind == gateway.KindConsumer {
				id = credID // APISIX 3.x's credential: {id: jack/credentials/a, plugins: …}
			} else if kind == gateway.KindConsumer {
				if u, ok := fields["username"].(string); ok && u != "" {
					id = u
				}
			} else if v, ok := fields["id"]; ok {
				s, ok := gateway.IDString(v)
				if !ok {
					return nil, fmt.Errorf("%s[%d]: id must be a string or an integer", key, i+1)
				}
				id = s
			}
			if _, dup := out[string(kind)+"/"+id]; dup {
				return nil, fmt.Errorf("%s[%d]: a second resource with id %q", key, i+1, id)
			}
			out[string(kind)+"/"+id] = gateway.Entry{Kind: kind, ID: id, Value: value}
		}
	}
	return out, nil
}

// Get implements gateway.Store.
func (s *Store) Get(_ context.Context, k gateway.Kind, id string) (gateway.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[string(k)+"/"+id]
	if !ok {
		return gateway.Entry{}, gateway.ErrNotFound
	}
	return e, nil
}

// List implements gateway.Store, in id order.
func (s *Store) List(_ context.Context, k gateway.Kind) ([]gateway.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []gateway.Entry
	for _, e := range s.entries {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b gateway.Entry) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Put implements gateway.Store: ErrReadOnly.
func (s *Store) Put(context.Context, gateway.Kind, string, []byte, int64) (gateway.Entry, bool, error) {
	return gateway.Entry{}, false, ErrReadOnly
}

// Delete implements gateway.Store: ErrReadOnly.
func (s *Store) Delete(context.Context, gateway.Kind, string) error { return ErrReadOnly }

// NextID implements gateway.Store: ErrReadOnly.
func (s *Store) NextID(context.Context) (string, error) { return "", ErrReadOnly }

// Watch delivers the configuration, then the whole of it again (a Reset)
// each time the file's content changes to a loadable one (or Replace
// writes one), until ctx ends.
func (s *Store) Watch(ctx context.Context, fn func(gateway.Update)) error {
	s.wmu.Lock()
	fn(s.snapshot())
	id := s.nextW
	s.nextW++
	s.watchers[id] = fn
	s.wmu.Unlock()
	defer func() {
		s.wmu.Lock()
		delete(s.watchers, id)
		s.wmu.Unlock()
	}()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		s.poll()
	}
}

// poll loads the file if it changed and delivers it.
func (s *Store) poll() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	changed, err := s.refresh()
	if err != nil {
		s.log.Error("config file not loaded; the last good configuration keeps serving", "path", s.path, "err", err)
	}
	if changed {
		s.deliverLocked("config file loaded")
	}
}

// deliverLocked hands the configuration to every watcher; s.wmu is held.
func (s *Store) deliverLocked(msg string) {
	u := s.snapshot()
	s.log.Info(msg, "path", s.path, "revision", u.Revision, "resources", len(u.Entries))
	for _, id := range slices.Sorted(maps.Keys(s.watchers)) {
		s.watchers[id](u)
	}
}

func (s *Store) snapshot() gateway.Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := gateway.Update{Reset: true, Revision: s.rev, Entries: make([]gateway.Entry, 0, len(s.entries))}
	for _, k := range slices.Sorted(maps.Keys(s.entries)) {
		u.Entries = append(u.Entries, s.entries[k])
	}
	return u
}

// Close implements gateway.Store.
func (s *Store) Close() error { return nil }
