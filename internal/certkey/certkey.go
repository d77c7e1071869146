// Package certkey holds the key semantics of certmagic's Storage for stores
// that keep flat keys (DynamoDB items, etcd keys) rather than files: keys
// are slash-separated paths, a "directory" is any proper prefix of a stored
// key ending at a slash, and listing a directory names its files and its
// subdirectories, as certmagic.FileStorage's walk does. It imports only the
// standard library, so that the adapters share one reading of the
// interface.
package certkey

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid says a key is not one certmagic writes: empty, with a leading
// or trailing slash, or with an empty component.
var ErrInvalid = errors.New("invalid storage key")

// Check refuses keys that have no place in a path tree.
func Check(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") || strings.Contains(key, "//") {
		return fmt.Errorf("%w %q", ErrInvalid, key)
	}
	return nil
}

// First returns the key's first component.
func First(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// Under reports whether key lies under the directory dir (a component
// prefix: "a" is above "a/b" but not "ab/c"). The empty dir is the root.
func Under(key, dir string) bool {
	return dir == "" || (len(key) > len(dir) && key[len(dir)] == '/' && strings.HasPrefix(key, dir))
}

// List returns, sorted, what FileStorage's List returns for dir given the
// stored files under it: with recursive, every file and every directory
// below dir; without, its immediate children, files and directories.
// Each name is the full key (dir + "/" + …). Files not under dir are
// ignored.
func List(dir string, files []string, recursive bool) []string {
	seen := map[string]bool{}
	for _, f := range files {
		if !Under(f, dir) {
			continue
		}
		start := len(dir) + 1
		if dir == "" {
			start = 0
		}
		for i := start; i <= len(f); i++ {
			if i < len(f) && f[i] != '/' {
				continue
			}
			seen[f[:i]] = true
			if !recursive {
				break
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
