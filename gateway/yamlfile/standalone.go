package yamlfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/linkgate/linkgate/gateway"
)

// ResourceKeys are the top-level keys of APISIX 3.x's standalone
// configuration that carry a <key>_conf_version (its
// config_validate.get_all_resource_keys: the etcd directories).
var ResourceKeys = []string{"consumer_groups", "consumers", "global_rules", "plugin_configs", "plugin_metadata",
	"plugins", "protos", "routes", "secrets", "services", "ssls", "stream_routes", "upstreams"}

// unsupported are resource keys linkgate has no resource for: a
// configuration with items under one is refused.
var unsupported = map[string]string{
	"plugins": "linkgate's plugins are compiled in: the plugins list is not supported",
	"protos":  "protos are not supported by linkgate (no gRPC transcoding)",
	"secrets": "secrets are not supported in the file store",
}

// The metadata keys APISIX 3.x keeps beside the configuration (and shows
// in GET /apisix/admin/configs); linkgate writes them into the file.
const (
	MetaLastModified = "X-Last-Modified"
	MetaDigest       = "X-Digest"
)

var errNotMeta = errors.New("not a metadata key")

// checkMetaKey checks a top-level key that is not a resource list:
// errNotMeta when key is not one.
func checkMetaKey(key string, v any) error {
	switch {
	case key == MetaDigest || key == MetaLastModified:
		return nil
	case strings.HasSuffix(key, "_conf_version") && slices.Contains(ResourceKeys, strings.TrimSuffix(key, "_conf_version")):
		if _, ok := number(v); !ok {
			return fmt.Errorf("%s must be a number", key)
		}
		return nil
	}
	if msg, ok := unsupported[key]; ok {
		if items, _ := v.([]any); len(items) > 0 {
			return errors.New(msg)
		}
		return nil
	}
	return errNotMeta
}

// Document is the configuration served, as GET /apisix/admin/configs
// shows it: the resource lists, every <key>_conf_version (0 when the
// file has none) and the metadata of the last Replace (its X-Digest, ""
// before any, and X-Last-Modified, unix seconds).
func (s *Store) Document() (doc map[string]any, digest string, lastModified int64) {
	s.mu.Lock()
	good := s.good
	s.mu.Unlock()
	doc = decodeDoc(good)
	for _, key := range ResourceKeys {
		if _, ok := doc[key+"_conf_version"]; !ok {
			doc[key+"_conf_version"] = 0
		}
	}
	digest, lastModified = metaOf(doc)
	return doc, digest, lastModified
}

func metaOf(doc map[string]any) (digest string, lastModified int64) {
	if d, ok := doc[MetaDigest]; ok && d != nil {
		digest = fmt.Sprint(d)
	}
	if v, ok := number(doc[MetaLastModified]); ok {
		lastModified = int64(v)
	}
	return digest, lastModified
}

// decodeDoc is a loaded file's content as JSON-like values, APISIX 2.x's
// ssl list under its 3.x name ssls.
func decodeDoc(b []byte) map[string]any {
	var doc map[string]any
	_ = yaml.Unmarshal(b, &doc) // b was loaded: it parses
	if doc == nil {
		doc = map[string]any{}
	}
	doc, _ = gateway.StringKeys(doc).(map[string]any)
	if v, ok := doc["ssl"]; ok {
		delete(doc, "ssl")
		doc["ssls"] = v
	}
	return doc
}

// Replace is APISIX 3.x's PUT /apisix/admin/configs on the file: body is
// the new configuration (validated by the caller), digest the client's
// X-Digest. The same digest as the last replacement's changes nothing
// (false). Otherwise, per resource key: a <key>_conf_version below the
// current one is a *ConfVersionError; absent, it is the current one + 1;
// equal to the current one, the resources of that key are kept as they
// are (body's ignored); else body's replace them. The result is written
// to the file atomically (a temporary file synced, renamed over it, the
// directory synced) and delivered to the watchers — the gateway serves it
// — before Replace returns.
func (s *Store) Replace(body map[string]any, digest string, now time.Time) (lastModified int64, changed bool, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	cur, curDigest, curModified := s.Document()
	if _, ok := cur[MetaDigest]; ok && curDigest == digest {
		return curModified, false, nil
	}
	next := map[string]any{}
	for _, key := range ResourceKeys {
		vkey := key + "_conf_version"
		current, _ := number(cur[vkey])
		v, given := body[vkey]
		version, ok := number(v)
		switch {
		case given && !ok:
			return 0, false, invalidf("%s must be a number", vkey)
		case given && version < current:
			return 0, false, invalidf("%s must be greater than or equal to (%s)", vkey, formatNumber(current))
		case !given:
			version = current + 1
		}
		next[vkey] = version
		if version == current {
			if items, ok := cur[key]; ok && items != nil {
				next[key] = items
			}
		} else if items, _ := body[key].([]any); len(items) > 0 {
			old, _ := cur[key].([]any)
			next[key] = keepUnmodified(old, items)
		}
	}
	next[MetaLastModified] = now.Unix()
	next[MetaDigest] = digest
	out, err := yaml.Marshal(plain(next))
	if err != nil {
		return 0, false, invalidf("%v", err)
	}
	out = append(out, "#END\n"...)
	entries, err := Parse(out)
	if err != nil {
		return 0, false, invalidf("%v", err)
	}
	if err := writeAtomic(s.fs, s.path, out); err != nil {
		return 0, false, fmt.Errorf("write %s: %w", s.path, err)
	}
	s.mu.Lock()
	s.loadLocked(out, entries)
	s.mu.Unlock()
	s.deliverLocked("config replaced (PUT /apisix/admin/configs)")
	return now.Unix(), true, nil
}

// invalidf is a configuration Replace refuses: the admin API answers 400.
func invalidf(format string, args ...any) error {
	return &gateway.ValidationError{Msg: fmt.Sprintf(format, args...), Reason: gateway.SkipInvalid}
}

// keepUnmodified is items where each item whose modifiedIndex equals that
// of the served item of the same id is the served item: APISIX's
// config_yaml keeps a resource whose modifiedIndex did not change, even if
// the rest of it did.
func keepUnmodified(served, items []any) []any {
	byID := map[string]map[string]any{}
	for _, it := range served {
		if m, ok := it.(map[string]any); ok {
			byID[itemID(m)] = m
		}
	}
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it
		m, ok := it.(map[string]any)
		if !ok || m["modifiedIndex"] == nil {
			continue
		}
		old, ok := byID[itemID(m)]
		a, _ := number(m["modifiedIndex"])
		if b, isNum := number(old["modifiedIndex"]); ok && isNum && a == b {
			out[i] = old
		}
	}
	return out
}

// itemID is APISIX's id of an item of the configuration: its id, else
// its username.
func itemID(m map[string]any) string {
	v := m["id"]
	if v == nil {
		v = m["username"]
	}
	if s, ok := gateway.IDString(v); ok {
		return s
	}
	return ""
}

// number reads a YAML or JSON number (json.Number, int, float64).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// plain turns json.Numbers (and integral floats) into the integers or
// floats YAML writes as numbers.
func plain(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = plain(e)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plain(e)
		}
		return out
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return plain(f)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
	}
	return v
}

// fileSystem is what writeAtomic does to the disk (a test records it).
type fileSystem interface {
	CreateTemp(dir, pattern string) (file, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	SyncDir(dir string) error
}

type file interface {
	io.Writer
	Chmod(os.FileMode) error
	Sync() error
	Close() error
	Name() string
}

type osFS struct{}

func (osFS) CreateTemp(dir, pattern string) (file, error) { return os.CreateTemp(dir, pattern) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeAtomic replaces path with b so that a crash leaves either the old
// content or the new, durably: a temporary file beside it, written and
// synced, renamed over path, then the directory synced (the rename's
// durability).
func writeAtomic(fs fileSystem, path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := fs.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			fs.Remove(f.Name())
		}
	}()
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm() // the file's own, not CreateTemp's 0600
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = fs.Rename(f.Name(), path); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}
