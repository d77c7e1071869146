package pebble

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	dto "github.com/prometheus/client_model/go"

	"github.com/linkgate/linkgate/shortener"
)

// WithCreatesNotSynced makes creates commit with pebble.NoSync: only the
// must-fail twin of the power-loss test uses it, to show the test sees a
// missing sync.
func WithCreatesNotSynced(o Options) Options {
	o.createSync = pebbledb.NoSync
	return o
}

// WithGuardClock gives the free-space guard a clock of the test's.
func WithGuardClock(o Options, clock func() time.Time) Options {
	o.clock = clock
	return o
}

// WithVisitChunkHook calls hook before each of AddVisits' commits with the
// number of links it holds and whether it syncs; an error it returns fails
// that commit.
func WithVisitChunkHook(o Options, hook func(links int, sync bool) error) Options {
	o.visitChunkHook = hook
	return o
}

// WithFindReads sets Find's budget of links a page reads.
func WithFindReads(o Options, n int) Options {
	o.findReads = n
	return o
}

// VisitChunk is how many links AddVisits commits at a time.
const VisitChunk = visitChunk

// GuardInterval is how long the guard trusts its last look.
const GuardInterval = guardInterval

// WithoutSyncGathering makes the write-ahead log sync as soon as a commit
// asks, whatever GOMAXPROCS is (pebble's default).
func WithoutSyncGathering(o Options) Options {
	o.syncGather = func() time.Duration { return 0 }
	return o
}

// WALSyncs returns how many times the write-ahead log was synced.
func WALSyncs(s *Store) uint64 {
	var m dto.Metric
	if err := s.db.Metrics().LogWriter.FsyncLatency.Write(&m); err != nil {
		panic(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// WriteStall returns what pebble calls when it stops writes and when it
// lets them go on again.
func WriteStall(s *Store) (begin, end func()) {
	return func() { s.events.stallBegin(pebbledb.WriteStallBeginInfo{Reason: "memtable count limit reached"}) }, s.events.stallEnd
}

// DropListIndex deletes the list's index, as a store written before it
// has none; the next Open builds it.
func DropListIndex(s *Store) error {
	return s.db.DeleteRange([]byte{kindListIndex}, []byte{kindListIndex + 1}, pebbledb.Sync)
}

// OlderListIndex leaves the list's index as the binary of version v
// wrote it: 1 (02908ad) has no 'e' or 'g' records and the marker "built",
// 2 (a410a59) no 'g' records and "built2", 3 (043328d) only the 'g'
// records of three ASCII bytes of the id or URL as stored, and "built3";
// the next Open rebuilds it. With newer, the current marker stays too: an
// older binary opened a newer store, and every link is one it wrote since.
func OlderListIndex(s *Store, v int, newer bool) error {
	b := s.db.NewBatch()
	defer b.Close()
	kinds := []byte{'g'}
	if v == 1 {
		kinds = append(kinds, 'e')
	}
	if v == 3 {
		kinds = nil
		if err := dropFoldedTrigrams(s, b); err != nil {
			return err
		}
	}
	for _, k := range kinds {
		if err := b.DeleteRange([]byte{kindListIndex, k}, []byte{kindListIndex, k + 1}, nil); err != nil {
			return err
		}
	}
	if !newer {
		if err := b.Delete(listIndexBuilt, nil); err != nil {
			return err
		}
	}
	if err := b.Set(listIndexOlder[v-1], nil, nil); err != nil {
		return err
	}
	return b.Commit(pebbledb.Sync)
}

// dropFoldedTrigrams deletes in b the 'g' records that 043328d did not
// write: those of a trigram that is not three ASCII bytes of the link's
// id or URL as stored (in lower case).
func dropFoldedTrigrams(s *Store, b *pebbledb.Batch) error {
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: linksLower, UpperBound: linksUpper})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		key := linkKey(it.Key())
		l, err := decodeLink(key, it.Value())
		if err != nil {
			return err
		}
		_, id := shortener.SplitKey(key)
		had := map[string]bool{}
		for _, s := range []string{id, l.URL} {
			for i := 0; i+3 <= len(s); i++ {
				if s[i]|s[i+1]|s[i+2] < 0x80 {
					had[strings.ToLower(s[i:i+3])] = true
				}
			}
		}
		for _, g := range trigrams(nil, id, l.URL) {
			if !had[string(g[:])] {
				if err := b.Delete(appendOrder([]byte{kindListIndex, 'g', g[0], g[1], g[2]}, key, l.CreatedAt), nil); err != nil {
					return err
				}
			}
		}
	}
	return it.Error()
}

// ListIndexRecords counts the list's index records, the marker aside.
func ListIndexRecords(s *Store) (int, error) {
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: []byte{kindListIndex}, UpperBound: []byte{kindListIndex + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if it.Key()[1] != 'm' {
			n++
		}
	}
	return n, it.Error()
}

// WriteSpanRecord writes into the closed store in dir the span record of
// link id over days (days since 1970 within one span → visits), as a
// migration to format 3 cut short after it wrote it leaves it.
func WriteSpanRecord(dir, id string, days map[uint32]shortener.PeopleBots) error {
	db, err := pebbledb.Open(dir, &pebbledb.Options{Merger: merger})
	if err != nil {
		return err
	}
	var span uint32
	rec := []byte{spanVersion}
	for _, d := range slices.Sorted(maps.Keys(days)) {
		span = d / spanDays
		rec = appendSpanDay(rec, byte(d%spanDays), days[d].People, days[d].Bots)
	}
	// Flushed into a table: Open's recovery (recovery.go) would take the
	// log of this default-options open, without sync offsets, for torn.
	err = db.Set(linkBucketKey(nil, resSpan, span, id), rec, pebbledb.Sync)
	if err == nil {
		err = db.Flush()
	}
	return errors.Join(err, db.Close())
}

// WithOpenSteps makes the work of an open (migrations, indexes) look at
// its context every batch links, calling hook first.
func WithOpenSteps(o Options, batch int, hook func()) Options {
	o.openBatch, o.openHook = batch, hook
	return o
}
