// Package certstoretest is the conformance suite of certmagic.Storage
// implementations: the file semantics certmagic relies on (Load after
// Store, fs.ErrNotExist for what is missing, component prefixes, listing
// and deleting directories) and the distributed lock (one holder per name
// across clients, a crashed holder's lock taken over once stale, unlock by
// the holder only). certmagic.FileStorage runs it too (certstoretest_test.go),
// so the suite states what the reference implementation does. Only tests
// import it.
package certstoretest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// Harness gives the suite one storage per test, reached through several
// clients (as several nodes of a cluster reach it).
type Harness struct {
	// Open returns a new, empty storage for t; each call of the function
	// it returns is another client of that storage (another node).
	Open func(t *testing.T) func() certmagic.Storage
	// Crash makes client c stop as a crashed node would, holding the
	// lock name: it neither releases nor renews it. The lock is then
	// stale (the test clock moved past its lease, a lock file left old)
	// or becomes stale by itself (a server-side lease runs out).
	Crash func(t *testing.T, c certmagic.Storage, name string)
	// UnlockChecksHolder says Unlock by a client that does not hold the
	// lock fails and leaves it held. certmagic.FileStorage removes the
	// lock file whoever calls; the shared stores check.
	UnlockChecksHolder bool
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("Files", func(t *testing.T) { testFiles(t, h) })
	t.Run("Exists", func(t *testing.T) { testExists(t, h) })
	t.Run("Stat", func(t *testing.T) { testStat(t, h) })
	t.Run("List", func(t *testing.T) { testList(t, h) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, h) })
	t.Run("LockExclusive", func(t *testing.T) { testLockExclusive(t, h) })
	t.Run("LockWaits", func(t *testing.T) { testLockWaits(t, h) })
	t.Run("LockCancel", func(t *testing.T) { testLockCancel(t, h) })
	t.Run("LockMany", func(t *testing.T) { testLockMany(t, h) })
	t.Run("LockStale", func(t *testing.T) { testLockStale(t, h) })
	t.Run("UnlockHolderOnly", func(t *testing.T) {
		if !h.UnlockChecksHolder {
			t.Skip("this storage's Unlock does not check the holder (certmagic calls it only after its own Lock)")
		}
		testUnlockHolderOnly(t, h)
	})
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func store(t *testing.T, ctx context.Context, s certmagic.Storage, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if err := s.Store(ctx, kv[i], []byte(kv[i+1])); err != nil {
			t.Fatalf("Store(%q): %v", kv[i], err)
		}
	}
}

// tree is the layout certmagic writes: certificates per issuer and site,
// ACME accounts, OCSP staples.
var tree = []string{
	"certificates/acme-v02/example.com/example.com.crt", "CERT",
	"certificates/acme-v02/example.com/example.com.key", "KEY",
	"certificates/acme-v02/example.com/example.com.json", `{"sans":["example.com"]}`,
	"certificates/acme-v02/example.org/example.org.crt", "CERT2",
	"acme/acme-v02/users/a@example.com/a.json", "ACCOUNT",
	"ocsp/example.com-1234", "STAPLE",
	"exampleX", "a file whose name extends another's",
}

func testFiles(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b := client(), client()
	binary := []byte{0, 1, 2, 0xff, '\n', 0}
	tests := []struct {
		key   string
		value []byte
	}{
		{"certificates/ca/example.com/example.com.crt", []byte("-----BEGIN CERTIFICATE-----\n")},
		{"binary", binary},
		{"empty", []byte{}},
		{"big", bytes.Repeat([]byte("0123456789abcdef"), 20<<10/16)},
	}
	for _, tt := range tests {
		if err := a.Store(ctx, tt.key, tt.value); err != nil {
			t.Fatalf("Store(%q): %v", tt.key, err)
		}
		for name, c := range map[string]certmagic.Storage{"same client": a, "other client": b} {
			got, err := c.Load(ctx, tt.key)
			if err != nil || !bytes.Equal(got, tt.value) {
				t.Errorf("%s: Load(%q) = %q, %v; want %q", name, tt.key, got, err, tt.value)
			}
		}
	}
	// Store overwrites, and the other client sees the new value.
	store(t, ctx, a, "binary", "second")
	if got, err := b.Load(ctx, "binary"); err != nil || string(got) != "second" {
		t.Errorf("Load after overwrite = %q, %v", got, err)
	}
	for _, k := range []string{"missing", "certificates/ca/example.com/other.crt"} {
		if _, err := b.Load(ctx, k); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Load(%q) = %v, want an error matching fs.ErrNotExist", k, err)
		}
	}
	// A directory has no value (FileStorage: "is a directory").
	if got, err := b.Load(ctx, "certificates/ca/example.com"); err == nil {
		t.Errorf("Load of a directory = %q, want an error", got)
	}
}

func testExists(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b := client(), client()
	store(t, ctx, a, tree...)
	tests := []struct {
		key  string
		want bool
	}{
		{"certificates/acme-v02/example.com/example.com.crt", true},
		{"certificates/acme-v02/example.com", true}, // a directory
		{"certificates", true},
		{"exampleX", true},
		{"certificates/acme-v02/example.co", false}, // a prefix, not a component
		{"example", false},
		{"nothing", false},
	}
	for _, tt := range tests {
		if got := b.Exists(ctx, tt.key); got != tt.want {
			t.Errorf("Exists(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

func testStat(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b := client(), client()
	before := time.Now().Add(-time.Minute) // clocks of test stores may differ a little
	store(t, ctx, a, tree...)
	tests := []struct {
		key      string
		terminal bool
		size     int64
	}{
		{"certificates/acme-v02/example.com/example.com.key", true, 3},
		{"ocsp/example.com-1234", true, 6},
		{"certificates/acme-v02", false, -1},
		{"acme", false, -1},
	}
	for _, tt := range tests {
		ki, err := b.Stat(ctx, tt.key)
		if err != nil {
			t.Errorf("Stat(%q): %v", tt.key, err)
			continue
		}
		if ki.Key != tt.key || ki.IsTerminal != tt.terminal || (tt.terminal && (ki.Size != tt.size || ki.Modified.Before(before))) {
			t.Errorf("Stat(%q) = %+v, want terminal %v size %d modified after %v", tt.key, ki, tt.terminal, tt.size, before)
		}
	}
	for _, k := range []string{"nothing", "certificates/acme-v0", "ocsp/example.com-123"} {
		if _, err := b.Stat(ctx, k); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat(%q) = %v, want an error matching fs.ErrNotExist", k, err)
		}
	}
	// A newer Store is a later Modified.
	k := "ocsp/example.com-1234"
	first, _ := b.Stat(ctx, k)
	store(t, ctx, a, k, "STAPLE2")
	second, err := b.Stat(ctx, k)
	if err != nil || second.Modified.Before(first.Modified) || second.Size != 7 {
		t.Errorf("Stat after overwrite = %+v, %v; first %+v", second, err, first)
	}
}

func testList(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b := client(), client()
	store(t, ctx, a, tree...)
	tests := []struct {
		prefix    string
		recursive bool
		want      []string
	}{
		{"certificates", false, []string{"certificates/acme-v02"}},
		{"certificates/acme-v02", false, []string{"certificates/acme-v02/example.com", "certificates/acme-v02/example.org"}},
		{"certificates/acme-v02/example.com", false, []string{
			"certificates/acme-v02/example.com/example.com.crt",
			"certificates/acme-v02/example.com/example.com.json",
			"certificates/acme-v02/example.com/example.com.key"}},
		{"certificates", true, []string{
			"certificates/acme-v02",
			"certificates/acme-v02/example.com",
			"certificates/acme-v02/example.com/example.com.crt",
			"certificates/acme-v02/example.com/example.com.json",
			"certificates/acme-v02/example.com/example.com.key",
			"certificates/acme-v02/example.org",
			"certificates/acme-v02/example.org/example.org.crt"}},
		{"acme/acme-v02/users", false, []string{"acme/acme-v02/users/a@example.com"}},
		{"ocsp", false, []string{"ocsp/example.com-1234"}},
		{"ocsp/example.com-1234", false, nil}, // a file has no children
	}
	for _, tt := range tests {
		got, err := b.List(ctx, tt.prefix, tt.recursive)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("List(%q, recursive %v) = %q, %v; want %q", tt.prefix, tt.recursive, got, err, tt.want)
		}
	}
	for _, p := range []string{"nothing", "certificates/acme-v0", "example"} {
		if got, err := b.List(ctx, p, false); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("List(%q) = %q, %v; want an error matching fs.ErrNotExist", p, got, err)
		}
	}
}

func testDelete(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b := client(), client()
	store(t, ctx, a, tree...)
	tests := []struct {
		del  string
		gone []string
		kept []string
	}{
		{"certificates/acme-v02/example.com/example.com.json",
			[]string{"certificates/acme-v02/example.com/example.com.json"},
			[]string{"certificates/acme-v02/example.com/example.com.crt"}},
		{"certificates/acme-v02/example.com", // a directory: everything below it
			[]string{"certificates/acme-v02/example.com", "certificates/acme-v02/example.com/example.com.crt", "certificates/acme-v02/example.com/example.com.key"},
			[]string{"certificates/acme-v02/example.org/example.org.crt"}},
		{"example", nil, []string{"exampleX"}}, // missing, and not a component prefix of exampleX
		{"nothing", nil, nil},
		{"acme", []string{"acme/acme-v02/users/a@example.com/a.json", "acme"}, []string{"ocsp/example.com-1234"}},
	}
	for _, tt := range tests {
		if err := b.Delete(ctx, tt.del); err != nil {
			t.Errorf("Delete(%q): %v", tt.del, err)
		}
		for _, k := range tt.gone {
			if a.Exists(ctx, k) {
				t.Errorf("after Delete(%q), %q exists", tt.del, k)
			}
		}
		for _, k := range tt.kept {
			if !a.Exists(ctx, k) {
				t.Errorf("after Delete(%q), %q is gone", tt.del, k)
			}
		}
	}
	if _, err := a.Load(ctx, "certificates/acme-v02/example.com/example.com.crt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a deleted key = %v, want fs.ErrNotExist", err)
	}
}

func tryLock(t *testing.T, ctx context.Context, s certmagic.Storage, name string) bool {
	t.Helper()
	tl, ok := s.(certmagic.TryLocker)
	if !ok {
		t.Fatalf("%T does not implement certmagic.TryLocker", s)
	}
	got, err := tl.TryLock(ctx, name)
	if err != nil {
		t.Fatalf("TryLock(%q): %v", name, err)
	}
	return got
}

func lock(t *testing.T, ctx context.Context, s certmagic.Storage, name string) {
	t.Helper()
	if err := s.Lock(ctx, name); err != nil {
		t.Fatalf("Lock(%q): %v", name, err)
	}
}

func unlock(t *testing.T, ctx context.Context, s certmagic.Storage, name string) {
	t.Helper()
	if err := s.Unlock(ctx, name); err != nil {
		t.Fatalf("Unlock(%q): %v", name, err)
	}
}

func testLockExclusive(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b := client(), client()
	lock(t, ctx, a, "issue_cert_example.com")
	if tryLock(t, ctx, b, "issue_cert_example.com") {
		t.Fatal("TryLock by another client succeeded while the lock was held")
	}
	// Another name is another lock.
	if !tryLock(t, ctx, b, "issue_cert_example.org") {
		t.Fatal("TryLock of another name failed")
	}
	unlock(t, ctx, b, "issue_cert_example.org")
	unlock(t, ctx, a, "issue_cert_example.com")
	if !tryLock(t, ctx, b, "issue_cert_example.com") {
		t.Fatal("TryLock after Unlock failed")
	}
	unlock(t, ctx, b, "issue_cert_example.com")
	// The same client, twice in a row.
	lock(t, ctx, a, "issue_cert_example.com")
	unlock(t, ctx, a, "issue_cert_example.com")
	lock(t, ctx, a, "issue_cert_example.com")
	unlock(t, ctx, a, "issue_cert_example.com")
}

func testLockWaits(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b := client(), client()
	lock(t, ctx, a, "n")
	done := make(chan error, 1)
	go func() { done <- b.Lock(ctx, "n") }()
	select {
	case err := <-done:
		t.Fatalf("Lock by another client returned (%v) while the lock was held", err)
	default:
	}
	unlock(t, ctx, a, "n")
	if err := <-done; err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	unlock(t, ctx, b, "n")
}

func testLockCancel(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b := client(), client()
	lock(t, ctx, a, "n")
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Lock(cctx, "n") }()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Lock with a cancelled context took a held lock")
	}
	unlock(t, ctx, a, "n")
	if !tryLock(t, ctx, b, "n") {
		t.Fatal("the cancelled Lock left the lock held")
	}
	unlock(t, ctx, b, "n")
}

// testLockMany runs goroutines of two clients (two per client) through one
// critical section and counts how many are ever inside at once.
func testLockMany(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	const n = 4
	clients := []certmagic.Storage{client(), client()}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		c := clients[i%2]
		wg.Go(func() {
			if err := c.Lock(ctx, "obtain"); err != nil {
				errs <- err
				return
			}
			in := inside.Add(1)
			for m := most.Load(); in > m && !most.CompareAndSwap(m, in); m = most.Load() {
			}
			// Store and load in the section, as certmagic does.
			if err := c.Store(ctx, "section", []byte("x")); err != nil {
				errs <- err
			}
			inside.Add(-1)
			errs <- c.Unlock(ctx, "obtain")
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d clients inside the critical section at once", m)
	}
}

func testLockStale(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b, c := client(), client(), client()
	lock(t, ctx, a, "n")
	h.Crash(t, a, "n")
	lock(t, ctx, b, "n") // takes over the stale lock
	if tryLock(t, ctx, c, "n") {
		t.Fatal("the lock taken over is not held")
	}
	unlock(t, ctx, b, "n")
	lock(t, ctx, c, "n")
	unlock(t, ctx, c, "n")
}

func testUnlockHolderOnly(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	client := h.Open(t)
	a, b, c := client(), client(), client()
	lock(t, ctx, a, "n")
	if err := b.Unlock(ctx, "n"); err == nil {
		t.Error("Unlock by a client that does not hold the lock succeeded")
	}
	if tryLock(t, ctx, c, "n") {
		t.Fatal("the lock was released by a client that did not hold it")
	}
	unlock(t, ctx, a, "n")
	if !tryLock(t, ctx, c, "n") {
		t.Fatal("TryLock after the holder's Unlock failed")
	}
	unlock(t, ctx, c, "n")
}
