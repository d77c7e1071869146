package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

const mib = 1 << 20

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Pass moves the clock past the guard's interval, so its next admission
// looks at the free space again.
func (c *testClock) Pass() {
	c.mu.Lock()
	c.now = c.now.Add(pebble.GuardInterval + time.Millisecond)
	c.mu.Unlock()
}

func setFree(fs *vfs.MemFS, free uint64) {
	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: free, TotalBytes: 1 << 30, UsedBytes: 1<<30 - free})
}

// createN creates links prefix0000… and returns the ids acknowledged and
// the first error.
func createN(ctx context.Context, s shortener.Store, prefix string, n int) ([]string, error) {
	var ok []string
	for i := range n {
		id := fmt.Sprintf("%s%04d", prefix, i)
		if err := s.Create(ctx, shortener.Link{ID: id, URL: "https://full.example/" + id}); err != nil {
			return ok, err
		}
		ok = append(ok, id)
	}
	return ok, nil
}

func checkAll(t *testing.T, s shortener.Store, ids []string) {
	t.Helper()
	for _, id := range ids {
		l, err := s.Get(context.Background(), id)
		if err != nil || l.URL != "https://full.example/"+id {
			t.Fatalf("acknowledged create %s: %+v, %v", id, l, err)
		}
	}
}

// reopenAndCheck closes s, opens the store "links" again with opts and
// checks that every acknowledged create is there.
func reopenAndCheck(t *testing.T, s *pebble.Store, opts pebble.Options, acked []string) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := pebble.Open("links", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAll(t, s, acked)
}

// Below MinFreeBytes every kind of write is refused with ErrUnavailable
// (and ErrDiskFull), reads go on, and writes resume once the space is
// back above it plus an eighth; nothing acknowledged is lost.
func TestDiskNearlyFullRefusesWrites(t *testing.T) {
	fs := vfs.NewMem()
	setFree(fs, 100*mib)
	clock := &testClock{now: time.Unix(1_800_000_000, 0)}
	opts := pebble.WithGuardClock(pebble.Options{FS: fs, MinFreeBytes: 8 * mib}, clock.Now)
	s, err := pebble.Open("links", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acked, err := createN(ctx, s, "before", 50)
	if err != nil {
		t.Fatal(err)
	}

	setFree(fs, 7*mib)
	// Within the guard's interval, with the budget of its last look, writes
	// still go through; then it looks again.
	clock.Pass()
	refusals := map[string]error{}
	refusals["create"] = s.Create(ctx, shortener.Link{ID: "refused01", URL: "https://full.example/x"})
	refusals["delete"] = s.Delete(ctx, acked[0])
	refusals["visits"] = s.AddVisits(ctx, shortener.NewVisitBatch(shortener.VisitDelta{ID: acked[1], Stats: shortener.VisitStats{Total: 1}}))
	_, refusals["import"] = s.ImportRecords(ctx, []shortener.LinkRecord{{Link: shortener.Link{ID: "refused02", URL: "https://full.example/y"}}})
	for op, err := range refusals {
		if !errors.Is(err, shortener.ErrUnavailable) || !errors.Is(err, pebble.ErrDiskFull) {
			t.Errorf("%s on a nearly full disk: %v, want ErrUnavailable and ErrDiskFull", op, err)
		}
	}
	if err != nil && !strings.Contains(err.Error(), "--store-min-free") {
		t.Errorf("the refusal does not say what to do: %v", err)
	}
	checkAll(t, s, acked)
	if _, err := s.Get(ctx, "refused01"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("the refused create is there: %v", err)
	}

	// Just above MinFreeBytes is not enough to resume (no flapping).
	setFree(fs, 8*mib+mib/2)
	clock.Pass()
	if err := s.Create(ctx, shortener.Link{ID: "refused03", URL: "https://full.example/z"}); !errors.Is(err, pebble.ErrDiskFull) {
		t.Errorf("create just above MinFreeBytes while refusing: %v, want ErrDiskFull", err)
	}
	setFree(fs, 20*mib)
	clock.Pass()
	more, err := createN(ctx, s, "after", 50)
	if err != nil {
		t.Fatalf("writes did not resume when space returned: %v", err)
	}
	acked = append(acked, more...)
	if err := s.Delete(ctx, acked[0]); err != nil {
		t.Fatal(err)
	}
	acked = acked[1:]
	reopenAndCheck(t, s, opts, acked)
}

// enospcFS is pebble's in-memory file system on which every write fails
// with ENOSPC while full is set; removing the ballast frees the space.
func enospcFS() (*vfs.MemFS, vfs.FS, *atomic.Bool, *atomic.Int64) {
	mem := vfs.NewMem()
	setFree(mem, 100*mib)
	var full atomic.Bool
	var hits atomic.Int64
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch {
		case op.Kind == errorfs.OpRemove && strings.HasSuffix(op.Path, "BALLAST"):
			full.Store(false) // the ballast's blocks are free again
		case full.Load() && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpFileSync):
			hits.Add(1)
			return syscall.ENOSPC
		}
		return nil
	}))
	return mem, fs, &full, &hits
}

// Pebble meeting ENOSPC (the disk filled between two of the guard's
// looks) does not end the process: the ballast is released, pebble's
// write is retried into its space, and the create that met it is
// acknowledged and durable; writes are then refused until there is room
// for the ballast again.
func TestENOSPCReleasesTheBallast(t *testing.T) {
	mem, fs, full, hits := enospcFS()
	clock := &testClock{now: time.Unix(1_800_000_000, 0)}
	opts := pebble.WithGuardClock(pebble.Options{FS: fs, MinFreeBytes: 2 * mib}, clock.Now)
	s, err := pebble.Open("links", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acked, err := createN(ctx, s, "before", 20)
	if err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	if err := s.Create(ctx, shortener.Link{ID: "enospc0001", URL: "https://full.example/enospc0001"}); err != nil {
		t.Fatalf("the create that met ENOSPC: %v", err)
	}
	acked = append(acked, "enospc0001")
	if hits.Load() == 0 {
		t.Fatal("no write met ENOSPC: the test tests nothing")
	}
	if err := s.Create(ctx, shortener.Link{ID: "refused01", URL: "https://full.example/x"}); !errors.Is(err, pebble.ErrDiskFull) {
		t.Fatalf("create after ENOSPC: %v, want ErrDiskFull", err)
	}
	// Writes resume once the free space holds MinFreeBytes and a new
	// ballast (and an eighth).
	setFree(mem, 2*mib+mib)
	clock.Pass()
	if err := s.Create(ctx, shortener.Link{ID: "refused02", URL: "https://full.example/x"}); !errors.Is(err, pebble.ErrDiskFull) {
		t.Fatalf("create without room for the ballast: %v, want ErrDiskFull", err)
	}
	setFree(mem, 10*mib)
	clock.Pass()
	more, err := createN(ctx, s, "after", 20)
	if err != nil {
		t.Fatalf("writes did not resume: %v", err)
	}
	acked = append(acked, more...)
	if _, err := mem.Stat("links/BALLAST"); err != nil {
		t.Errorf("the ballast was not made again: %v", err)
	}
	reopenAndCheck(t, s, opts, acked)
}

// The guard and the ballast are what keeps the process alive: without
// them (MinFreeBytes < 0), the same ENOSPC ends it through pebble's
// Fatalf. The store runs in a child process (this test binary again).
func TestENOSPCWithoutGuardEndsTheProcess(t *testing.T) {
	if os.Getenv("LINKGATE_TEST_ENOSPC_CHILD") == "1" {
		_, fs, full, _ := enospcFS()
		s, err := pebble.Open("links", pebble.Options{FS: fs, MinFreeBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		full.Store(true)
		err = s.Create(context.Background(), shortener.Link{ID: "enospc0001", URL: "https://full.example/"})
		fmt.Printf("the process is still running: Create returned %v\n", err)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestENOSPCWithoutGuardEndsTheProcess$")
	cmd.Env = append(os.Environ(), "LINKGATE_TEST_ENOSPC_CHILD=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 70 {
		t.Fatalf("without the guard, ENOSPC did not end the process with pebble's fatal error (status 70): %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "no space left on device") {
		t.Errorf("the child's last words do not name ENOSPC:\n%s", out)
	}
}
