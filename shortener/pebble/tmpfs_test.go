//go:build linux

package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

func freeBytes(t *testing.T, dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// A real full disk: the store on a small tmpfs, the rest of it taken by
// another file, concurrent creates until the store refuses them. The
// process never meets pebble's fatal error, every refusal is ErrDiskFull,
// creates succeed again once the other file is gone, and every
// acknowledged create is there after a reopen.
func TestDiskFullOnTmpfs(t *testing.T) {
	mnt := testdep.Tmpfs(t, 160*mib)
	dir := filepath.Join(mnt, "links")
	const minFree = 16 * mib
	s, err := pebble.Open(dir, pebble.Options{MinFreeBytes: minFree})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The first create maps the read index's first chunk.
	acked, err := createN(ctx, s, "first", 1)
	if err != nil {
		t.Fatal(err)
	}
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fallocate(int(filler.Fd()), 0, 0, freeBytes(t, mnt)-(minFree+4*mib))
	filler.Close()
	if err != nil {
		t.Fatal(err)
	}

	const writers = 32
	var mu sync.Mutex
	var others []error
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; i < 1_000_000; i++ {
				id := fmt.Sprintf("w%02d%07d", w, i)
				err := s.Create(ctx, shortener.Link{ID: id, URL: "https://full.example/" + id})
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, id)
				case !errors.Is(err, pebble.ErrDiskFull) || !errors.Is(err, shortener.ErrUnavailable):
					others = append(others, err)
				}
				mu.Unlock()
				if err != nil {
					return // refused: this writer stops
				}
			}
		})
	}
	wg.Wait()
	if len(others) > 0 {
		t.Fatalf("%d creates failed otherwise than disk full, first: %v", len(others), others[0])
	}
	t.Logf("%d creates acknowledged before the store refused them; %d MiB free", len(acked), freeBytes(t, mnt)>>20)
	if free := freeBytes(t, mnt); free <= 0 {
		t.Errorf("the file system filled up completely (%d bytes free): the guard came too late", free)
	}

	if err := os.Remove(filler.Name()); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "a create once space is back", func() bool {
		err := s.Create(ctx, shortener.Link{ID: "again0001", URL: "https://full.example/again0001"})
		return err == nil
	})
	acked = append(acked, "again0001")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(dir, pebble.Options{MinFreeBytes: minFree})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAll(t, s, acked)
}
