package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// The create log. A create is durable once its record is in the log and
// the log is fdatasync'ed: one append and one fdatasync cover every create
// that arrived while the previous group was being written (group commit),
// instead of a bbolt commit that rewrites two random pages per link of a
// large store and syncs twice. Logged links live in memory (pending.go)
// until a background commit applies them to the bbolt file, in batches of
// thousands, together with the sequence number of the last one applied
// (metaBucket, appliedKey): replay after a crash re-applies exactly the
// records after it, so a Delete that follows an applied create is never
// undone.
//
// The log is two files, path-wal.0 and path-wal.1, written alternately:
// once the active one holds rotateSize bytes and every record of the other
// is applied, the other becomes the active one and is written from its
// start again. The files only grow, a MiB of zeros at a time, so that the
// fdatasync of an append rarely has to write the file's size as well (on
// ext4 that is a second synchronous write). Old records left after the
// write position are all applied (a file is reused only then), and replay
// skips every record at or below the applied sequence number. Each file
// is a header (walMagic) followed by records:
//
//	uint32  length of the payload (little endian)
//	uint32  CRC-32C of the payload
//	payload:
//	  byte    kind (recordCreate)
//	  uvarint sequence number (increasing across files and restarts)
//	  uvarint id length, id
//	  bytes   the link's value as in the links bucket (codec.go), the rest
//
// A crash can leave a torn record at the end of the active file: reading
// stops at the first record that is short or fails its checksum. No
// acknowledged record follows it, since a group is acknowledged only after
// its fdatasync and the next group is written after that.
const (
	walMagic      = "lgwal\x00\x00\x01"
	recordCreate  = 1
	recordHeader  = 8
	maxRecordSize = 1 << 20 // far above any valid link (URLs are capped at a few KiB)
)

// rotateSize is the size at which the active log file is swapped for the
// other (a variable for tests).
var rotateSize int64 = 16 << 20

// growStep is how much a log file grows (with zeros) when a write would
// pass its end.
const growStep = 1 << 20

var (
	appliedKey = []byte("walApplied") // in metaBucket: the last applied sequence number
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	errRecord  = errors.New("invalid log record")
)

// appendRecord appends a create record to dst.
func appendRecord(dst []byte, seq uint64, id string, val []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recordHeader)...)
	dst = append(dst, recordCreate)
	dst = binary.AppendUvarint(dst, seq)
	dst = binary.AppendUvarint(dst, uint64(len(id)))
	dst = append(dst, id...)
	dst = append(dst, val...)
	payload := dst[start+recordHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
	return dst
}

// decodeRecord parses the record at the start of b and returns its fields
// (id and val alias b) and its whole length. errRecord means a torn or
// corrupt record: the log ends before it.
func decodeRecord(b []byte) (seq uint64, id, val []byte, n int, err error) {
	if len(b) < recordHeader {
		return 0, nil, nil, 0, errRecord
	}
	size := binary.LittleEndian.Uint32(b)
	if size == 0 || size > maxRecordSize || uint64(size) > uint64(len(b)-recordHeader) {
		return 0, nil, nil, 0, errRecord
	}
	payload := b[recordHeader : recordHeader+int(size)]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return 0, nil, nil, 0, errRecord
	}
	if payload[0] != recordCreate {
		return 0, nil, nil, 0, errRecord
	}
	rest := payload[1:]
	seq, k := binary.Uvarint(rest)
	if k <= 0 {
		return 0, nil, nil, 0, errRecord
	}
	rest = rest[k:]
	idLen, k := binary.Uvarint(rest)
	if k <= 0 || idLen == 0 || idLen > uint64(len(rest)-k) {
		return 0, nil, nil, 0, errRecord
	}
	id, val = rest[k:k+int(idLen)], rest[k+int(idLen):]
	if _, _, err := decodeMeta(val); err != nil {
		return 0, nil, nil, 0, errRecord
	}
	return seq, id, val, recordHeader + int(size), nil
}

// walRecord is a record read back from the create log.
type walRecord struct {
	seq uint64
	id  string
	val []byte
}

// readLog returns the records of one log file up to the first torn or
// corrupt one. A missing, empty or header-less file (torn while it was
// being emptied) has none; a file that starts with anything else is not
// ours and is an error.
func readLog(path string) ([]walRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) < len(walMagic) {
		return nil, nil
	}
	if string(b[:len(walMagic)]) != walMagic {
		return nil, fmt.Errorf("%s is not a linkgate create log", path)
	}
	var recs []walRecord
	for b = b[len(walMagic):]; len(b) > 0; {
		seq, id, val, n, err := decodeRecord(b)
		if err != nil {
			break // torn tail
		}
		recs = append(recs, walRecord{seq, string(id), val})
		b = b[n:]
	}
	return recs, nil
}

// wal appends records and makes them durable in groups.
type wal struct {
	paths [2]string
	files [2]*os.File
	// Owned by the syncer goroutine (and by Open and Close while it is
	// not running):
	active  int       // index of the file written to
	size    int64     // write position in the active file
	end     int64     // the active file's size
	lastSeq [2]uint64 // last sequence number written to each file
	spare   []byte
	rotate  int64 // rotateSize when opened

	wake    chan struct{} // a record is waiting (capacity 1)
	stop    chan struct{}
	stopped chan struct{}
	applied *atomic.Uint64 // the store's last applied sequence number

	mu      *sync.RWMutex // the Store's: guards buf, cur, lastBuf and failed
	buf     []byte        // records not yet written
	cur     *group        // the group buf's records belong to
	lastBuf uint64        // sequence number of buf's last record
	failed  error         // set once a write or sync failed; later creates fail
}

// group is the set of creates made durable by one write and fdatasync.
type group struct {
	done    chan struct{} // closed once err is set
	err     error
	entries []*pendingLink
}

func newGroup() *group { return &group{done: make(chan struct{})} }

// openWAL opens (creating) the two log files next to the store at path and
// returns them with every record they hold; the caller applies the
// records, then calls reset before the first append.
func openWAL(path string, mu *sync.RWMutex, applied *atomic.Uint64) (*wal, []walRecord, error) {
	w := &wal{
		mu:      mu,
		rotate:  rotateSize,
		paths:   [2]string{path + "-wal.0", path + "-wal.1"},
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		applied: applied,
		cur:     newGroup(),
	}
	var recs []walRecord
	for i, p := range w.paths {
		r, err := readLog(p)
		if err != nil {
			return nil, nil, fmt.Errorf("read create log: %w", err)
		}
		recs = append(recs, r...)
		if w.files[i], err = os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			w.closeFiles()
			return nil, nil, fmt.Errorf("open create log: %w", err)
		}
	}
	return w, recs, nil
}

// reset makes file 0 the active one, written from its start, once every
// record in the log is applied; the header of each file is made durable.
func (w *wal) reset() error {
	for i := range w.files {
		if err := w.prepare(i); err != nil {
			return err
		}
	}
	w.lastSeq = [2]uint64{}
	if err := w.activate(0); err != nil {
		return err
	}
	// The files may be new: make their directory entries durable too.
	d, err := os.Open(filepath.Dir(w.paths[0]))
	if err != nil {
		return fmt.Errorf("sync create log directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync create log directory: %w", err)
	}
	return nil
}

// prepare writes file i's header if it has none.
func (w *wal) prepare(i int) error {
	f := w.files[i]
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("prepare create log: %w", err)
	}
	if fi.Size() >= int64(len(walMagic)) {
		return nil // ours: readLog checked the header
	}
	if _, err := f.WriteAt([]byte(walMagic), 0); err != nil {
		return fmt.Errorf("prepare create log: %w", err)
	}
	if err := fdatasync(f); err != nil {
		return fmt.Errorf("prepare create log: %w", err)
	}
	return nil
}

// activate makes file i the one written to, from its start. Every record
// it holds must be applied.
func (w *wal) activate(i int) error {
	fi, err := w.files[i].Stat()
	if err != nil {
		return err
	}
	w.active, w.size, w.end, w.lastSeq[i] = i, int64(len(walMagic)), fi.Size(), 0
	return nil
}

// add queues a record (under w.mu, with the overlay entry p) and returns
// the group that will carry it.
func (w *wal) add(seq uint64, id string, p *pendingLink) (*group, error) {
	if w.failed != nil {
		return nil, w.failed
	}
	w.buf = appendRecord(w.buf, seq, id, p.val)
	w.lastBuf = seq
	g := w.cur
	g.entries = append(g.entries, p)
	return g, nil
}

// kick wakes the syncer.
func (w *wal) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run is the syncer: it writes each group of records, syncs, and then
// acknowledges the group. While it syncs, the next group gathers.
func (w *wal) run() {
	defer close(w.stopped)
	for {
		select {
		case <-w.wake:
			w.flush()
		case <-w.stop:
			w.flush() // Close comes after every create has returned; this is a no-op then
			return
		}
	}
}

// flush writes and syncs the queued group, if any.
func (w *wal) flush() {
	w.mu.Lock()
	buf, g, last := w.buf, w.cur, w.lastBuf
	if len(buf) == 0 {
		w.mu.Unlock()
		return
	}
	w.buf, w.cur = w.spare[:0], newGroup()
	w.mu.Unlock()

	err := w.write(buf, last)
	if err != nil {
		err = fmt.Errorf("write create log: %w", err)
		w.mu.Lock()
		w.failed = err // the file's tail is unknown: log nothing more
		w.mu.Unlock()
	}
	for _, p := range g.entries {
		p.durable.Store(err == nil)
	}
	g.err = err
	close(g.done)
	w.spare = buf
}

// write appends buf to the active file and syncs it, first rotating to
// the other file if the active one is full and the other's records are
// all applied.
func (w *wal) write(buf []byte, last uint64) error {
	if other := 1 - w.active; w.size >= w.rotate && w.lastSeq[other] <= w.applied.Load() {
		if err := w.activate(other); err != nil {
			return err
		}
	}
	f := w.files[w.active]
	if need := w.size + int64(len(buf)); need > w.end {
		grow := max(need-w.end, min(growStep, w.rotate))
		if _, err := f.WriteAt(make([]byte, grow), w.end); err != nil {
			return err
		}
		w.end += grow
	}
	if _, err := f.WriteAt(buf, w.size); err != nil {
		return err
	}
	w.size += int64(len(buf))
	w.lastSeq[w.active] = last
	return fdatasync(f)
}

// close stops the syncer once it has written what is queued.
func (w *wal) close() {
	close(w.stop)
	<-w.stopped
}

func (w *wal) closeFiles() error {
	var errs []error
	for _, f := range w.files {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}
