//go:build !functiononly

package dynamodb_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/caddyserver/certmagic"

	"github.com/linkgate/linkgate/internal/certstoretest"
	"github.com/linkgate/linkgate/shortener/dynamodb"
)

// newCertTable creates a certificate table unique to this test and deletes
// it at cleanup.
func newCertTable(t testing.TB, c *ddb.Client) string {
	t.Helper()
	name := fmt.Sprintf("lg-certs-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamodb.CreateCertTable(ctx, c, name, true, 30*time.Second, io.Discard); err != nil {
		t.Fatalf("create certificate table: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.DeleteTable(ctx, &ddb.DeleteTableInput{TableName: &name})
	})
	return name
}

// testClock is the clients' shared lease clock: the wall clock plus what
// the test adds.
type testClock struct{ ahead atomic.Int64 }

func (c *testClock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

func TestCertStorage(t *testing.T) {
	const lease = time.Minute // renewals never run within a test: the clock moves, not time
	clocks := map[certmagic.Storage]*testClock{}
	certstoretest.Run(t, certstoretest.Harness{
		Open: func(t *testing.T) func() certmagic.Storage {
			c := localClient(t)
			table := newCertTable(t, c)
			clock := &testClock{}
			return func() certmagic.Storage {
				s := dynamodb.NewCertStorage(c, dynamodb.CertOptions{
					Table: table, Timeout: 10 * time.Second, LockLease: lease, LockPoll: 20 * time.Millisecond, Clock: clock.Now,
				})
				clocks[s] = clock
				return s
			}
		},
		Crash: func(t *testing.T, s certmagic.Storage, name string) {
			s.(*dynamodb.CertStorage).Crash(name)
			clocks[s].ahead.Add(int64(lease + time.Second))
		},
		UnlockChecksHolder: true,
	})
}

// A holder that renews its lease keeps the lock past the lease it took it
// with; one that stops renewing loses it at the lease's end, and its
// Unlock then fails rather than release the new holder's lock.
func TestCertStorageLease(t *testing.T) {
	c := localClient(t)
	table := newCertTable(t, c)
	clock := &testClock{}
	open := func() *dynamodb.CertStorage {
		return dynamodb.NewCertStorage(c, dynamodb.CertOptions{Table: table, Timeout: 10 * time.Second, LockLease: time.Minute, Clock: clock.Now})
	}
	a, b := open(), open()
	ctx := t.Context()
	steps := []struct {
		name  string
		do    func() error
		ahead time.Duration
		bGets bool // b's TryLock after the step
	}{
		{"a locks", func() error { return a.Lock(ctx, "n") }, 0, false},
		{"a renews for 10 minutes", func() error { return a.RenewLockLease(ctx, "n", 10*time.Minute) }, 0, false},
		{"two minutes later, past the first lease", nil, 2 * time.Minute, false},
		{"eleven minutes later, past the renewed lease", nil, 9 * time.Minute, true},
	}
	for _, st := range steps {
		if st.do != nil {
			if err := st.do(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		clock.ahead.Add(int64(st.ahead))
		got, err := b.TryLock(ctx, "n")
		if err != nil || got != st.bGets {
			t.Fatalf("%s: b's TryLock = %v, %v; want %v", st.name, got, err, st.bGets)
		}
	}
	if err := a.RenewLockLease(ctx, "n", time.Minute); err == nil || !strings.Contains(err.Error(), "taken over") {
		t.Errorf("a's renewal after b took over = %v, want taken over", err)
	}
	if err := a.Unlock(ctx, "n"); err == nil {
		t.Error("a's Unlock after b took over succeeded")
	}
	if got, _ := open().TryLock(ctx, "n"); got {
		t.Error("a's Unlock released b's lock")
	}
	if err := b.Unlock(ctx, "n"); err != nil {
		t.Errorf("b's Unlock: %v", err)
	}
}

func TestCreateCertTable(t *testing.T) {
	c := localClient(t)
	name := newCertTable(t, c)
	var out strings.Builder
	if err := dynamodb.CreateCertTable(t.Context(), c, name, false, time.Minute, &out); err != nil || !strings.Contains(out.String(), "already exists") {
		t.Errorf("CreateCertTable again: %v, output %q", err, out.String())
	}
	// A links table is not a certificate table.
	links := newTable(t, c)
	if err := dynamodb.CreateCertTable(t.Context(), c, links, false, time.Minute, io.Discard); err == nil || !strings.Contains(err.Error(), "not a certificate table") {
		t.Errorf("CreateCertTable over a links table: %v", err)
	}
}
