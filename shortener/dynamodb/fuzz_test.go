package dynamodb

import (
	"encoding/base64"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

// Cursors come from clients: anything either decodes to a valid key that
// encodes back to the same cursor, or is refused as InvalidParameter.
func FuzzDecodeCursor(f *testing.F) {
	for _, s := range []string{"", "YWJj", "!!not a cursor!!", "\x00\xff", "%%%", base64.RawURLEncoding.EncodeToString([]byte("abcdefghij"))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		id, err := decodeCursor(cursor)
		if err != nil {
			if shortener.ErrorCode(err) != shortener.InvalidParameter {
				t.Fatalf("decodeCursor(%q) error %v, want InvalidParameter", cursor, err)
			}
			return
		}
		if !validKey(id) || !utf8.ValidString(id) {
			t.Fatalf("decodeCursor(%q) = invalid key %q", cursor, id)
		}
		if again := base64.RawURLEncoding.EncodeToString([]byte(id)); again != cursor {
			t.Fatalf("cursor %q decodes to %q, which encodes to %q", cursor, id, again)
		}
	})
}

// Items written by other tools may hold any number text: decode never
// panics, and what it accepts round-trips through encode.
func FuzzDecodeItem(f *testing.F) {
	for _, s := range []string{"0", "1700000000", "-5", "1.7e9", "NaN", "", "9223372036854775807", "1e400", "abc"} {
		f.Add("abcdefghij", "https://x.example/", s, s)
	}
	f.Fuzz(func(t *testing.T, id, url, created, visits string) {
		item := map[string]types.AttributeValue{
			AttrID:        &types.AttributeValueMemberS{Value: id},
			AttrURL:       &types.AttributeValueMemberS{Value: url},
			AttrCreatedAt: &types.AttributeValueMemberN{Value: created},
			AttrVisits:    &types.AttributeValueMemberN{Value: visits},
		}
		l, err := decode(item)
		if err != nil {
			return
		}
		back, err := decode(encode(l))
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", l, err)
		}
		if back.ID != l.ID || back.URL != l.URL || !back.CreatedAt.Equal(l.CreatedAt) || back.Visits != l.Visits {
			t.Fatalf("round trip: %+v became %+v", l, back)
		}
	})
}

// Records and state items are read back from the table: decoding never
// panics, and what it accepts encodes to something that decodes the same.
func FuzzDecodeDeltas(f *testing.F) {
	f.Add(sampleSet().encode(nil))
	f.Add(hourlySet().encodeRaw(nil))
	f.Add(version1Set())
	f.Add([]byte{deltaVersion, 0, 0})
	f.Add([]byte{deltaVersion, 1, 9, 0, 0, 3, 'a', 'b', 'c'})
	f.Add([]byte{deltaVersion, 1, 9, 1, 0xe0, 0xa4, 0x1b, 3, 'a', 'b', 'c'})
	f.Add([]byte{deltaVersionV1, 1, 9, 3, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, b []byte) {
		set := newDeltaSet()
		if err := set.decodeInto(b); err != nil {
			return
		}
		enc := set.encode(nil)
		again := newDeltaSet()
		if err := again.decodeInto(enc); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if string(again.encode(nil)) != string(enc) {
			t.Fatalf("encoding is not stable")
		}
	})
}
