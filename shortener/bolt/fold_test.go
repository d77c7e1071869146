package bolt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/linkgate/linkgate/shortener"
)

// foldModel checks the visit log, its fold and the tombs against a model:
// a map of what each link's statistics must be, whatever the store does
// underneath (log records, fold steps cut anywhere, restarts in the middle
// of a fold, deletes and creates of the same ids, links with a limit).
type foldModel struct {
	t       *testing.T
	rng     *rand.Rand
	path    string
	s       *Store
	ids     []string
	exists  map[string]bool
	limited map[string]bool
	want    map[string]*shortener.VisitStats
	ops     []string // for failure messages
}

func newFoldModel(t *testing.T, seed uint64, links int) *foldModel {
	m := &foldModel{t: t, rng: rand.New(rand.NewPCG(seed, 7)), path: filepath.Join(t.TempDir(), "links.db"),
		exists: map[string]bool{}, limited: map[string]bool{}, want: map[string]*shortener.VisitStats{}}
	m.open()
	t.Cleanup(func() { m.s.Close() })
	for i := range links {
		id := fmt.Sprintf("fold%06d", i*7919%1000003)
		m.ids = append(m.ids, id)
		m.create(id)
	}
	return m
}

func (m *foldModel) open() {
	m.t.Helper()
	s, err := open(m.path, false)
	if err != nil {
		m.t.Fatal(err)
	}
	// Tiny chunks and steps, so a fold of a few dozen links takes many
	// steps and cuts chunks everywhere.
	s.vlog.chunkSize = 64 + m.rng.IntN(256)
	s.vlog.stepBytes = 1 + m.rng.IntN(512)
	m.s = s
}

func (m *foldModel) logf(format string, args ...any) {
	m.ops = append(m.ops, fmt.Sprintf(format, args...))
}

func (m *foldModel) fatalf(format string, args ...any) {
	m.t.Helper()
	if len(m.ops) > 12 {
		m.ops = m.ops[len(m.ops)-12:]
	}
	m.t.Fatalf("%s\nlast operations:\n%q", fmt.Sprintf(format, args...), m.ops)
}

func (m *foldModel) create(id string) {
	m.t.Helper()
	l := shortener.Link{ID: id, URL: "https://" + id + ".example/", CreatedAt: time.Unix(1700000000, 0).UTC()}
	if m.rng.IntN(4) == 0 {
		l.MaxVisits = 1 << 40 // a limit: its visits are counted in place
	}
	if err := m.s.Create(context.Background(), l); err != nil {
		m.fatalf("create %s: %v", id, err)
	}
	m.exists[id], m.limited[id] = true, l.MaxVisits > 0
	m.want[id] = &shortener.VisitStats{}
	m.logf("create %s limited=%v", id, m.limited[id])
}

var (
	foldDays  = []string{"2026-03-13", "2026-03-14", "2026-03-15"}
	foldRefs  = []string{shortener.DirectReferrer, "a.example", "b.example", "news.example.com", "x.example"}
	foldAgent = []string{"Chrome", "Firefox", "Safari"}
)

// add writes one batch of visits of random links, the deleted ones too
// (the aggregator may flush visits of a link deleted since).
func (m *foldModel) add() {
	m.t.Helper()
	var deltas []shortener.VisitDelta
	n := 1 + m.rng.IntN(len(m.ids))
	for range n {
		id := m.ids[m.rng.IntN(len(m.ids))]
		total := int64(1 + m.rng.IntN(5))
		bots := int64(m.rng.IntN(int(total) + 1))
		st := shortener.VisitStats{Total: total, Bots: bots,
			Days:      shortener.Breakdown{foldDays[m.rng.IntN(len(foldDays))]: total},
			Referrers: shortener.Breakdown{foldRefs[m.rng.IntN(len(foldRefs))]: total},
		}
		if total > bots {
			st.Browsers = shortener.Breakdown{foldAgent[m.rng.IntN(len(foldAgent))]: total - bots}
		}
		if bots > 0 {
			st.BotAgents = shortener.Breakdown{"Slackbot": bots}
		}
		deltas = append(deltas, shortener.VisitDelta{ID: id, Stats: st, Limited: m.limited[id] && m.exists[id]})
		if m.exists[id] {
			m.want[id].Add(st)
		}
	}
	b := shortener.NewVisitBatch(deltas...)
	if err := m.s.AddVisits(context.Background(), b); err != nil {
		m.fatalf("AddVisits: %v", err)
	}
	m.logf("add %d links", len(b.Links))
}

func (m *foldModel) step() {
	m.t.Helper()
	budget := 1 + m.rng.IntN(600)
	done, err := m.s.foldStep(budget)
	if err != nil {
		m.fatalf("fold step: %v", err)
	}
	m.logf("fold step budget %d done=%v", budget, done)
}

func (m *foldModel) remove() {
	m.t.Helper()
	id := m.ids[m.rng.IntN(len(m.ids))]
	if !m.exists[id] {
		m.create(id)
		return
	}
	if err := m.s.Delete(context.Background(), id); err != nil {
		m.fatalf("delete %s: %v", id, err)
	}
	m.exists[id] = false
	delete(m.want, id)
	m.logf("delete %s", id)
}

func (m *foldModel) reopen() {
	m.t.Helper()
	if err := m.s.Close(); err != nil {
		m.fatalf("close: %v", err)
	}
	m.open()
	m.logf("reopen")
}

// check compares every link's statistics (and, for limited links, the
// count Get reports) with the model.
func (m *foldModel) check() {
	m.t.Helper()
	ctx := context.Background()
	for _, id := range m.ids {
		got, err := m.s.VisitStats(ctx, id)
		if !m.exists[id] {
			if !errors.Is(err, shortener.ErrNotFound) {
				m.fatalf("VisitStats(deleted %s) = %v, want ErrNotFound", id, err)
			}
			continue
		}
		if err != nil {
			m.fatalf("VisitStats(%s): %v", id, err)
		}
		want := *m.want[id]
		want.Bound()
		if !sameStats(got, want) {
			m.fatalf("VisitStats(%s) =\n%+v\nwant\n%+v", id, got, want)
		}
		if m.limited[id] {
			l, err := m.s.Get(ctx, id)
			if err != nil || l.Visits != want.Total {
				m.fatalf("Get(%s).Visits = %d, %v; want %d", id, l.Visits, err, want.Total)
			}
		}
	}
}

func sameStats(a, b shortener.VisitStats) bool {
	eq := func(x, y shortener.Breakdown) bool { return len(x) == len(y) && maps.Equal(x, y) }
	return a.Total == b.Total && a.Bots == b.Bots && eq(a.Days, b.Days) && eq(a.Referrers, b.Referrers) &&
		eq(a.Browsers, b.Browsers) && eq(a.BotAgents, b.BotAgents) && eq(a.Countries, b.Countries)
}

// TestFoldModel runs random sequences of batches, fold steps, deletes,
// creates and restarts, and checks every link's statistics after each.
func TestFoldModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			m := newFoldModel(t, seed, 40)
			for range 150 {
				switch r := m.rng.IntN(20); {
				case r < 8:
					m.add()
				case r < 15:
					m.step()
				case r < 17:
					m.remove()
				case r < 18:
					m.reopen()
				default:
					if err := m.s.Fold(); err != nil {
						m.fatalf("Fold: %v", err)
					}
					m.logf("fold")
				}
				m.check()
			}
			// A complete fold empties the log and accounts for it.
			if err := m.s.Fold(); err != nil {
				t.Fatal(err)
			}
			m.check()
			err := m.s.db.View(func(tx *bbolt.Tx) error {
				if k, _ := tx.Bucket(logBucket).Cursor().First(); k != nil {
					t.Errorf("log record %x left after a complete fold", k)
				}
				if fs := readFoldState(tx); fs.target != 0 || len(fs.next) != 0 {
					t.Errorf("fold state after a complete fold: %+v", fs)
				}
				var runBytes int64
				c := tx.Bucket(runsBucket).Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					runBytes += int64(len(v))
				}
				if got := m.s.vlog.runBytes.Load(); got != runBytes {
					t.Errorf("runBytes = %d, the runs hold %d bytes", got, runBytes)
				}
				if lb, lr := m.s.vlog.logBytes.Load(), m.s.vlog.logRecords.Load(); lb != 0 || lr != 0 {
					t.Errorf("empty log accounted as %d bytes in %d records", lb, lr)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFoldResumesAfterRestart: a fold stopped in the middle (a stop or a
// crash between steps) is finished by the background folder of the next
// Open, and the statistics are exact before, during and after.
func TestFoldResumesAfterRestart(t *testing.T) {
	m := newFoldModel(t, 99, 60)
	for range 6 {
		m.add()
	}
	for range 3 {
		m.step()
	}
	var fs foldState
	m.s.db.View(func(tx *bbolt.Tx) error { fs = readFoldState(tx); return nil })
	if fs.target == 0 {
		t.Fatalf("no fold in progress after a few small steps: %+v", fs)
	}
	m.check()
	if err := m.s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(m.path) // with the background folder
	if err != nil {
		t.Fatal(err)
	}
	m.s = s
	m.check()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if e := s.vlog.err.Load(); e != nil {
			t.Fatalf("background fold: %v", *e)
		}
		s.db.View(func(tx *bbolt.Tx) error { fs = readFoldState(tx); return nil })
		// The fold counter moves just after the finishing step commits.
		if fs.target == 0 && s.vlog.folds.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the interrupted fold was not resumed and counted: %+v, %d folds", fs, s.vlog.folds.Load())
		}
	}
	m.check()
}
