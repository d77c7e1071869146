package bolt

import (
	"testing"

	"github.com/linkgate/linkgate/shortener/internal/statsrec"
)

// FuzzLogRecord: a visit log record read from an old store never panics
// the reader, whatever its bytes.
func FuzzLogRecord(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 17, 0, 0, 0})
	f.Add([]byte{1, 1, 0, 0, 0, 1, 0, 0, 0, 22, 0, 0, 0, 26, 0, 0, 0, 0, 3, 'a', 'b', 'c', 17, 0, 0, 0, 22, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseLogRecord(b)
		if err != nil {
			return
		}
		var d statsrec.Delta
		for off := r.linksFrom; off < r.linksTo; {
			var l logLink
			if l, off, err = r.readLink(off); err != nil {
				break
			}
			if err := r.addTo(&d, &l); err != nil {
				break
			}
		}
	})
}

// FuzzDecodeLink: a link value of an old store never panics the decoder.
func FuzzDecodeLink(f *testing.F) {
	f.Add([]byte{1, 3, 2, 4, 0, 0, 'h'})
	f.Fuzz(func(t *testing.T, b []byte) {
		if l, err := decodeLink("x", b); err == nil && l.ID != "x" {
			t.Fatal("id lost")
		}
	})
}
