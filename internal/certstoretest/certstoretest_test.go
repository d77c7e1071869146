package certstoretest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/linkgate/linkgate/internal/certstoretest"
)

// certmagic's own FileStorage is the reference: the suite holds for it.
func TestFileStorage(t *testing.T) {
	certstoretest.Run(t, certstoretest.Harness{
		Open: func(t *testing.T) func() certmagic.Storage {
			dir := t.TempDir()
			return func() certmagic.Storage { return &certmagic.FileStorage{Path: dir} }
		},
		// A crashed process leaves its lock file, no longer refreshed:
		// rewrite it as one last refreshed a minute ago (FileStorage
		// takes over a lock not refreshed for 10 s).
		Crash: func(t *testing.T, c certmagic.Storage, name string) {
			fs := c.(*certmagic.FileStorage)
			old := time.Now().Add(-time.Minute)
			b, _ := json.Marshal(map[string]time.Time{"created": old, "updated": old})
			f := filepath.Join(fs.Path, "locks", certmagic.StorageKeys.Safe(name)+".lock")
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
	})
}
