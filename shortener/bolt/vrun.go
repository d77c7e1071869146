package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"

	bbolt "go.etcd.io/bbolt"
)

// The folded visit statistics of links without a visit limit live in the
// visitruns bucket, as one sorted run cut into chunks of about
// runChunkSize bytes: a chunk's key is the first link id in it, its value
//
//	byte    version (1)
//	then per link, in id order: uvarint id length, id,
//	uvarint record length, statistics record (encodeStats)
//
// so that folding the log rewrites a few hundred chunks, not a million
// records, and a link's statistics are found in the chunk whose key is
// the greatest not above its id.
const (
	runVersion   = 1
	runChunkSize = 32 << 10
)

var errCorruptRun = errors.New("corrupt visit statistics chunk")

// runEntry reads the entry at the start of b (a chunk's entries), and
// returns the rest.
func runEntry(b []byte) (id, rec, rest []byte, err error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, nil, errCorruptRun
	}
	id, b = b[n:n+int(l)], b[n+int(l):]
	if l, n = binary.Uvarint(b); n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, nil, errCorruptRun
	}
	return id, b[n : n+int(l)], b[n+int(l):], nil
}

func runEntries(v []byte) ([]byte, error) {
	if len(v) < 1 || v[0] != runVersion {
		return nil, errCorruptRun
	}
	return v[1:], nil
}

// findRun returns the folded statistics record of id in runs, or nil.
func findRun(runs *bbolt.Bucket, id []byte) ([]byte, error) {
	c := runs.Cursor()
	k, v := c.Seek(id)
	if k == nil || !bytes.Equal(k, id) {
		k, v = c.Prev()
	}
	if k == nil {
		return nil, nil
	}
	b, err := runEntries(v)
	if err != nil {
		return nil, err
	}
	for len(b) > 0 {
		var eid, rec []byte
		if eid, rec, b, err = runEntry(b); err != nil {
			return nil, err
		}
		switch bytes.Compare(eid, id) {
		case 0:
			return rec, nil
		case 1:
			return nil, nil
		}
	}
	return nil, nil
}

// chunkWriter cuts a run of entries into chunks of about max bytes.
type chunkWriter struct {
	max    int
	cur    []byte // the chunk being written
	first  []byte // its first id
	chunks []kv   // finished chunks
	size   int    // bytes written
}

type kv struct{ k, v []byte }

func (w *chunkWriter) add(id, rec []byte) {
	if len(w.cur) == 0 {
		// Each chunk has memory of its own: bbolt keeps the values
		// put until the commit.
		w.cur = append(make([]byte, 0, w.max+len(id)+len(rec)+2*binary.MaxVarintLen64), runVersion)
		w.first = append([]byte(nil), id...)
	}
	n := len(w.cur)
	w.cur = binary.AppendUvarint(w.cur, uint64(len(id)))
	w.cur = append(w.cur, id...)
	w.cur = binary.AppendUvarint(w.cur, uint64(len(rec)))
	w.cur = append(w.cur, rec...)
	w.size += len(w.cur) - n
	if len(w.cur) >= w.max {
		w.cut()
	}
}

// addEntries appends entries of another chunk, as they are.
func (w *chunkWriter) addEntries(b []byte) error {
	for len(b) > 0 {
		id, rec, rest, err := runEntry(b)
		if err != nil {
			return err
		}
		w.add(id, rec)
		b = rest
	}
	return nil
}

// cut finishes the current chunk.
func (w *chunkWriter) cut() {
	if len(w.cur) > 0 {
		w.chunks = append(w.chunks, kv{w.first, w.cur})
		w.cur, w.first = nil, nil
	}
}
