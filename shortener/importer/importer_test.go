package importer_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/importer"
	"github.com/linkgate/linkgate/shortener/storetest"
)

// readAll reads input in format: the records by id, and the errors as
// "line N: message".
func readAll(t *testing.T, format string, input []byte) (map[string]shortener.LinkRecord, []string, error) {
	t.Helper()
	recs := map[string]shortener.LinkRecord{}
	var bad []string
	err := importer.Read(format, bytes.NewReader(input), func(l importer.Line) error {
		if l.Err != nil {
			bad = append(bad, fmt.Sprintf("line %d: %v", l.Line, l.Err))
			return nil
		}
		recs[l.Rec.Link.ID] = l.Rec
		return nil
	})
	return recs, bad, err
}

// Each reader reads a sample in its project's format (testdata, written
// from each project's documented columns): the valid lines with their
// URL, time and visit count, the others reported by line.
func TestReadFormats(t *testing.T) {
	ts := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t.UTC() }
	tests := []struct {
		format, file string
		links        int                       // valid records
		bad          []string                  // the errors, each the start of one
		want         map[string]shortener.Link // some of the links
	}{
		{"yourls", "yourls.csv", 2, []string{"line 4: id \"bad key\"", "line 5: nourl: URL"},
			map[string]shortener.Link{"ozh": {URL: "https://ozh.org/", CreatedAt: ts("2009-06-14T16:39:19Z"), Visits: 42}}},
		{"yourls-sql", "yourls.sql", 3, []string{"line 20: id \"b@d\""},
			map[string]shortener.Link{"yourls": {URL: "https://yourls.org/?a=1&b='2'", CreatedAt: ts("2009-06-14T16:39:20Z"), Visits: 7},
				"with-nl": {URL: "https://example.com/x", CreatedAt: ts("2021-03-04T05:06:07Z")}}},
		{"kutt", "kutt.json", 2, []string{"line 3: time \"not a date\""},
			map[string]shortener.Link{"gh": {URL: "https://github.com/thedevs-network/kutt", CreatedAt: ts("2024-01-15T09:30:00Z"), Visits: 12},
				"soon": {URL: "https://example.com/soon", CreatedAt: ts("2024-02-01T00:00:00Z"), ExpiresAt: ts("2030-02-01T00:00:00Z")}}},
		{"shlink", "shlink.csv", 2, []string{"line 4: id \"\""},
			map[string]shortener.Link{"abc123": {URL: "https://shlink.io/documentation/", CreatedAt: ts("2023-05-02T08:11:12Z"), Visits: 31}}},
		{"bitly", "bitly.csv", 2, nil,
			map[string]shortener.Link{"3xYzAbC": {URL: "https://www.example.com/landing?x=1", CreatedAt: ts("2022-11-05T14:22:01Z"), Visits: 128}}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			recs, bad, err := readAll(t, tt.format, b)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tt.links || len(bad) != len(tt.bad) {
				t.Fatalf("%d links and errors %q; want %d links and %d errors", len(recs), bad, tt.links, len(tt.bad))
			}
			for i, want := range tt.bad {
				if !strings.HasPrefix(bad[i], want) {
					t.Errorf("error %q, want %q…", bad[i], want)
				}
			}
			for id, w := range tt.want {
				g := recs[id].Link
				if g.URL != w.URL || !g.CreatedAt.Equal(w.CreatedAt) || !g.ExpiresAt.Equal(w.ExpiresAt) || g.Visits != w.Visits {
					t.Errorf("%s: got %+v, want %+v", id, g, w)
				}
			}
		})
	}
}

// JSON Lines: what Writer writes, Read reads back whole (every field,
// the statistics, the domain); blank lines and CRLF are fine; a line
// over MaxLine, an unknown field or a bad link is that line's error and
// the lines after it are read.
func TestJSONLinesRoundTrip(t *testing.T) {
	created := time.Unix(1.9e9, 0).UTC()
	recs := []shortener.LinkRecord{
		{Link: shortener.Link{ID: "plain", URL: "https://p.example/", CreatedAt: created}},
		{Link: shortener.Link{ID: shortener.LinkKey("go.example.com", "promo"), URL: "https://go.example/?a=<b>", CreatedAt: created,
			ExpiresAt: created.Add(time.Hour), MaxVisits: 9, Visits: 4, Tags: []string{"a", "b:c"}, ForwardQuery: shortener.ForwardOff},
			Stats: shortener.VisitStats{Total: 3, Bots: 1, Browsers: shortener.Breakdown{"Firefox": 2}}},
	}
	var buf bytes.Buffer
	w, err := importer.NewWriter(importer.JSONL, &buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil || w.Count() != 2 {
		t.Fatalf("flush: %v, %d written", err, w.Count())
	}
	in := strings.Replace(buf.String(), "\n", "\r\n\n", 1) + // line 1, a blank line 2, line 3
		`{"id":"long","url":"https://l.example/` + strings.Repeat("x", importer.MaxLine) + `"}` + "\n" + // 4
		`{"id":"unknown","url":"https://u.example/","bogus":1}` + "\n" + // 5
		`{"id":"bad url","url":"ftp://u.example/"}` + "\n" + // 6
		`{"id":"last","url":"https://last.example/"}` // 7, no line feed
	var got []shortener.LinkRecord
	var bad []string
	err = importer.Read(importer.JSONL, strings.NewReader(in), func(l importer.Line) error {
		if l.Err != nil {
			bad = append(bad, fmt.Sprintf("%d %v", l.Line, l.Err))
		} else {
			got = append(got, l.Rec)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !storetest.Equal(got[0].Link, recs[0].Link) || !storetest.Equal(got[1].Link, recs[1].Link) ||
		!storetest.EqualStats(got[1].Stats, recs[1].Stats) || got[2].Link.ID != "last" {
		t.Errorf("read back %+v\nwant %+v and last", got, recs)
	}
	if len(bad) != 3 || !strings.HasPrefix(bad[0], "4 line longer than") || !strings.HasPrefix(bad[1], "5 json: unknown field") || !strings.HasPrefix(bad[2], "6 id \"bad url\"") {
		t.Errorf("errors %q", bad)
	}
}

// Lines bounds a line at MaxLine whatever the input, and numbers the
// lines as an editor does.
func TestLines(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // "n:line" or "n:error"
	}{
		{"empty", "", nil},
		{"one without a line feed", "a", []string{"1:a"}},
		{"blank lines", "\n\nb\n", []string{"1:", "2:", "3:b"}},
		{"just under the limit", strings.Repeat("y", importer.MaxLine) + "\nz", []string{fmt.Sprintf("1:%d bytes", importer.MaxLine), "2:z"}},
		{"over the limit", strings.Repeat("y", importer.MaxLine+1) + "\nz\n", []string{"1:" + importer.ErrLineTooLong.Error(), "2:z"}},
		{"over the limit at the end", "a\n" + strings.Repeat("y", 3*importer.MaxLine), []string{"1:a", "2:" + importer.ErrLineTooLong.Error()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := importer.Lines(strings.NewReader(tt.in), func(n int, b []byte, err error) error {
				switch {
				case err != nil:
					got = append(got, fmt.Sprintf("%d:%v", n, err))
				case len(b) > 1000:
					got = append(got, fmt.Sprintf("%d:%d bytes", n, len(b)))
				default:
					got = append(got, fmt.Sprintf("%d:%s", n, b))
				}
				return nil
			})
			if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	stop := errors.New("stop")
	if err := importer.Lines(strings.NewReader("a\nb\n"), func(int, []byte, error) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}
}

// FuzzRead: no input makes a reader panic or hand out a record that is
// not a valid link.
func FuzzRead(f *testing.F) {
	for i, name := range []string{"yourls.csv", "yourls.sql", "kutt.json", "shlink.csv", "bitly.csv"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	f.Add(uint8(5), []byte(`{"id":"a","url":"https://a.example/","stats":{"Total":3}}`+"\n"))
	formats := []string{"yourls", "yourls-sql", "kutt", "shlink", "bitly", "jsonl", "csv"}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		importer.Read(formats[int(which)%len(formats)], bytes.NewReader(b), func(l importer.Line) error {
			if l.Err == nil && importer.Check(&l.Rec.Link) != nil {
				t.Fatalf("line %d: invalid record %+v without an error", l.Line, l.Rec)
			}
			return nil
		})
	})
}

// FuzzLines: every line Lines hands out is at most MaxLine bytes, and
// the lines joined again are the input (when none was too long).
func FuzzLines(f *testing.F) {
	f.Add([]byte("a\nb\r\n\nc"))
	f.Add([]byte("\r\n\r"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > importer.MaxLine {
			return // a line over the limit is an error: TestLines
		}
		var out [][]byte
		err := importer.Lines(bytes.NewReader(in), func(n int, b []byte, err error) error {
			if err != nil || len(b) > importer.MaxLine || n != len(out)+1 {
				t.Fatalf("line %d: %d bytes, %v", n, len(b), err)
			}
			out = append(out, bytes.Clone(b))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Lines drops a line's "\n" and one "\r" before it.
		want := bytes.Split(in, []byte("\n"))
		if len(want[len(want)-1]) == 0 {
			want = want[:len(want)-1]
		}
		if len(out) != len(want) {
			t.Fatalf("%d lines, want %d", len(out), len(want))
		}
		for i := range want {
			if w := bytes.TrimSuffix(want[i], []byte("\r")); !bytes.Equal(out[i], w) {
				t.Fatalf("line %d: %q, want %q", i+1, out[i], w)
			}
		}
	})
}
