package pebble

import (
	"slices"
	"testing"

	"github.com/linkgate/linkgate/shortener"
)

// A link that a search matches holds every trigram that the search walks
// (queryGrams): the index never leaves out a link the scan lists.
func FuzzQueryGrams(f *testing.F) {
	for _, c := range []struct{ id, url, q string }{
		{"Ab3dE6", "https://Site1.example/Path/7?utm=x", "PATH/7"},
		{"r001", "https://s1.example/café/ÉTÉ", "été"},
		{"r002", "https://s1.example/xss\u212akk", "xſſkkk"},
		{"r003", "https://s2.example/" + "abcdefghijklmnopqrstuvwxyz0123456789", "DEFGHIJKLMNOPQRSTUVWXYZ01"},
		{"r004", "https://s3.example/a", "r00"},
		{"r005", "https://s3.example/\xff\xfe", "\xff\xfe"},
	} {
		f.Add(c.id, c.url, c.q)
	}
	f.Fuzz(func(t *testing.T, id, url, q string) {
		if !(shortener.ListFilter{Query: q}).Match(&shortener.Link{ID: id, URL: url}) {
			return
		}
		held := trigrams(nil, id, url)
		grams := queryGrams(q)
		if len(grams) > maxQueryGrams {
			t.Fatalf("%q walks %d trigram lists, at most %d", q, len(grams), maxQueryGrams)
		}
		for _, g := range grams {
			if _, found := slices.BinarySearchFunc(held, g[2:], func(h [3]byte, g []byte) int { return slices.Compare(h[:], g) }); !found {
				t.Fatalf("id %q, URL %q match %q but hold no trigram %q", id, url, q, g[2:])
			}
		}
	})
}
