package bolt

import (
	"bytes"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// FuzzDecodeRecord: a create log record read back after a crash never
// panics the decoder; whatever decodes re-encodes to the same bytes, and
// any change to a valid record's bytes is rejected (the checksum).
func FuzzDecodeRecord(f *testing.F) {
	val := encode(shortener.Link{URL: "https://fuzz.example/a", CreatedAt: time.Unix(1700000000, 0), MaxVisits: 3})
	f.Add(appendRecord(nil, 1, "abcdefghij", val), 0, byte(0))
	f.Add(appendRecord(nil, 1<<40, "slug", encode(shortener.Link{URL: "x"})), 9, byte(0x80))
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0}, 4, byte(1))
	f.Fuzz(func(t *testing.T, b []byte, at int, flip byte) {
		if seq, id, v, n, err := decodeRecord(b); err == nil {
			if again := appendRecord(nil, seq, string(id), v); !bytes.Equal(again, b[:n]) {
				t.Fatalf("round trip changed the record: %x → %x", b[:n], again)
			}
		}
		// A valid record with one byte changed is never accepted as a
		// different record.
		rec := appendRecord(nil, uint64(len(b)), "fuzz000001", append(val[:len(val):len(val)], b...))
		if at < 0 || flip == 0 {
			return
		}
		at %= len(rec)
		rec[at] ^= flip
		if _, id, v, _, err := decodeRecord(rec); err == nil && (string(id) != "fuzz000001" || !bytes.Equal(v[:len(val)], val)) {
			t.Fatalf("corrupted record accepted: byte %d ^ %#x", at, flip)
		}
	})
}
