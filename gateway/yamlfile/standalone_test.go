package yamlfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
)

func route(id, uri string) map[string]any {
	return map[string]any{"id": id, "uri": uri, "upstream_id": "u1"}
}

func withIndex(m map[string]any, i int) map[string]any {
	m["modifiedIndex"] = i
	return m
}

func list(items ...map[string]any) []any {
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}

func openEmpty(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	if err := os.WriteFile(path, []byte("#END\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, nil, time.Hour) // no poll during a test: what serves comes from Replace
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

// APISIX 3.18's standalone.lua rules, as its standalone.spec.ts and
// standalone.t exercise them, one PUT after another on one store.
func TestReplaceConfVersions(t *testing.T) {
	s, _ := openEmpty(t)
	now := time.Unix(1700000000, 0)
	steps := []struct {
		name    string
		body    map[string]any
		digest  string
		changed bool
		err     string
		want    map[string]any // <key>_conf_version and resource lists after
	}{
		{name: "first: every version 0 → 1", body: map[string]any{"routes": list(route("r1", "/r1"))}, digest: "1", changed: true,
			want: map[string]any{"routes_conf_version": 1, "ssls_conf_version": 1, "secrets_conf_version": 1, "routes": 1}},
		{name: "same digest: nothing changes", body: map[string]any{}, digest: "1",
			want: map[string]any{"routes_conf_version": 1, "routes": 1}},
		{name: "given version kept as given, absent ones +1", body: map[string]any{"routes_conf_version": 1000, "routes": list(route("r1", "/r1"), route("r2", "/r2"))}, digest: "2", changed: true,
			want: map[string]any{"routes_conf_version": 1000, "upstreams_conf_version": 2, "routes": 2}},
		{name: "equal version: the routes kept as they are, the body's ignored", body: map[string]any{"routes_conf_version": 1000, "routes": list(route("r9", "/r9"))}, digest: "3", changed: true,
			want: map[string]any{"routes_conf_version": 1000, "upstreams_conf_version": 3, "routes": 2}},
		{name: "lower version refused", body: map[string]any{"routes_conf_version": 1}, digest: "4",
			err: "routes_conf_version must be greater than or equal to (1000)"},
		{name: "not a number", body: map[string]any{"routes_conf_version": "adc"}, digest: "4", err: "routes_conf_version must be a number"},
		{name: "only a version: the routes gone", body: map[string]any{"routes_conf_version": 1001}, digest: "5", changed: true,
			want: map[string]any{"routes_conf_version": 1001, "upstreams_conf_version": 4, "routes": 0}},
		{name: "modifiedIndex unchanged: the served route kept", body: map[string]any{"routes": list(withIndex(route("r1", "/r1"), 1))}, digest: "7", changed: true,
			want: map[string]any{"routes": 1, "uri r1": "/r1"}},
		{name: "same modifiedIndex, other uri: still the served one", body: map[string]any{"routes": list(withIndex(route("r1", "/r2"), 1), route("r3", "/r3"))}, digest: "8", changed: true,
			want: map[string]any{"routes": 2, "uri r1": "/r1"}},
		{name: "modifiedIndex changed: replaced", body: map[string]any{"routes": list(withIndex(route("r1", "/r2"), 2))}, digest: "9", changed: true,
			want: map[string]any{"routes": 1, "uri r1": "/r2"}},
		{name: "no modifiedIndex: replaced", body: map[string]any{"routes": list(route("r1", "/r4"))}, digest: "10", changed: true,
			want: map[string]any{"routes": 1, "uri r1": "/r4"}},
		{name: "unsupported resources refused", body: map[string]any{"protos": list(map[string]any{"id": "1"})}, digest: "6", err: "protos are not supported"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			modified, changed, err := s.Replace(st.body, st.digest, now)
			if st.err != "" {
				var ve *gateway.ValidationError
				if !errors.As(err, &ve) || !strings.Contains(ve.Msg, st.err) {
					t.Fatalf("err %v, want a ValidationError %q", err, st.err)
				}
				return
			}
			if err != nil || changed != st.changed || modified != now.Unix() {
				t.Fatalf("Replace: %d %v %v, want changed %v", modified, changed, err, st.changed)
			}
			doc, digest, _ := s.Document()
			if st.changed && digest != st.digest {
				t.Errorf("digest %q, want %q", digest, st.digest)
			}
			for k, v := range st.want {
				if id, ok := strings.CutPrefix(k, "uri "); ok {
					if e, err := s.Get(context.Background(), gateway.KindRoute, id); err != nil || !strings.Contains(string(e.Value), `"uri":"`+v.(string)+`"`) {
						t.Errorf("route %s: %s %v, want uri %s", id, e.Value, err, v)
					}
					continue
				}
				if !strings.HasSuffix(k, "_conf_version") {
					if items, _ := doc[k].([]any); len(items) != v.(int) {
						t.Errorf("%s: %v, want %d items", k, doc[k], v)
					}
					continue
				}
				if got, _ := number(doc[k]); got != float64(v.(int)) {
					t.Errorf("%s = %v, want %v", k, doc[k], v)
				}
			}
		})
	}
}

// Replace serves the new configuration before it returns: a running
// Watch (which would poll only hourly) has been handed it, and the file
// reopened holds it.
func TestReplaceDeliversAndPersists(t *testing.T) {
	s, path := openEmpty(t)
	var mu sync.Mutex
	var got []gateway.Update
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	first := make(chan struct{})
	go func() {
		done <- s.Watch(ctx, func(u gateway.Update) {
			mu.Lock()
			got = append(got, u)
			if len(got) == 1 {
				close(first)
			}
			mu.Unlock()
		})
	}()
	<-first
	if _, _, err := s.Replace(map[string]any{"routes": list(route("r1", "/r1"))}, "d1", time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if n := len(got); n != 2 || len(got[1].Entries) != 1 || got[1].Entries[0].ID != "r1" || !got[1].Reset {
		t.Errorf("updates delivered by the time Replace returned: %+v", got)
	}
	mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	again, err := Open(path, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := again.Get(context.Background(), gateway.KindRoute, "r1"); err != nil || !strings.Contains(string(e.Value), `"uri":"/r1"`) {
		t.Errorf("reopened: %+v %v", e, err)
	}
	if _, digest, modified := again.Document(); digest != "d1" || modified != 1 {
		t.Errorf("reopened: digest %q modified %d", digest, modified)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("the file's mode: %v %v, want 0640 kept", st.Mode(), err)
	}
}

// recordFS is the real file system, recording what writeAtomic does;
// failWrite makes the temporary file's write fail after half the bytes.
type recordFS struct {
	osFS
	ops       []string
	failWrite bool
}

type recordFile struct {
	*os.File
	fs *recordFS
}

func (r *recordFS) CreateTemp(dir, pattern string) (file, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	r.ops = append(r.ops, "create "+filepath.Dir(f.Name()))
	return &recordFile{f, r}, nil
}

func (f *recordFile) Write(b []byte) (int, error) {
	if f.fs.failWrite {
		n, _ := f.File.Write(b[:len(b)/2])
		f.fs.ops = append(f.fs.ops, "write (failed)")
		return n, errors.New("disk full")
	}
	f.fs.ops = append(f.fs.ops, "write")
	return f.File.Write(b)
}

func (f *recordFile) Sync() error {
	f.fs.ops = append(f.fs.ops, "sync")
	return f.File.Sync()
}

func (f *recordFile) Close() error {
	f.fs.ops = append(f.fs.ops, "close")
	return f.File.Close()
}

func (r *recordFS) Rename(oldpath, newpath string) error {
	r.ops = append(r.ops, "rename to "+filepath.Base(newpath))
	return os.Rename(oldpath, newpath)
}

func (r *recordFS) Remove(name string) error {
	r.ops = append(r.ops, "remove")
	return os.Remove(name)
}

func (r *recordFS) SyncDir(dir string) error {
	r.ops = append(r.ops, "sync "+dir)
	return r.osFS.SyncDir(dir)
}

// The file is replaced durably and atomically: written beside it, synced,
// renamed over it, the directory synced; a write that fails leaves the
// old file and configuration as they were, and no temporary file.
func TestReplaceAtomic(t *testing.T) {
	s, path := openEmpty(t)
	dir := filepath.Dir(path)
	rec := &recordFS{}
	s.fs = rec
	if _, _, err := s.Replace(map[string]any{"routes": list(route("r1", "/r1"))}, "d1", time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	want := []string{"create " + dir, "write", "sync", "close", "rename to apisix.yaml", "sync " + dir}
	if strings.Join(rec.ops, ", ") != strings.Join(want, ", ") {
		t.Errorf("operations:\n %v\nwant\n %v", rec.ops, want)
	}

	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rec.ops, rec.failWrite = nil, true
	if _, _, err := s.Replace(map[string]any{"routes": list(route("r2", "/r2"))}, "d2", time.Unix(2, 0)); err == nil {
		t.Fatal("Replace with a failing write: no error")
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("a failed write changed the file:\n%s\nwas\n%s", after, before)
	}
	if _, digest, _ := s.Document(); digest != "d1" {
		t.Errorf("served digest %q after a failed write, want d1", digest)
	}
	if _, err := s.Get(context.Background(), gateway.KindRoute, "r2"); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("r2 served after a failed write: %v", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, ".apisix.yaml.tmp*")); len(names) != 0 {
		t.Errorf("temporary files left: %v", names)
	}
}
