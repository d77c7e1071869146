// Package importer reads and writes links in files: linkgate's own export
// formats (JSON Lines, with every field and the statistics, and CSV) and
// the formats people migrate from, as those projects define them:
//
//   - yourls: the yourls_url table (keyword, url, title, timestamp, ip,
//     clicks) as a CSV with a header (phpMyAdmin's or mysql's export), or
//     yourls-sql: the INSERT statements of a mysqldump of that table;
//   - kutt: Kutt has no file export; its API's link list (GET
//     /api/v2/links: {"data": [{"address", "target", "visit_count",
//     "created_at", "expire_in", …}]}), or one such object per line;
//   - shlink: the CSV the Shlink web client exports (createdAt, domain,
//     shortCode, shortUrl, longUrl, title, tags, visits);
//   - bitly: Bitly's links CSV (link or bitlink, long_url, title,
//     created_at, and a clicks column where the export has one).
//
// Visit counts of other projects become the link's Visits (counted before
// statistics were kept), so totals carry over; their breakdowns do not.
//
// A problem with one line (not a valid link, a line too long) is that
// line's error, and reading goes on; only input that cannot be read on
// (a broken SQL statement, a CSV without the columns) ends it. Every
// record handed out without an error is a valid link (Check). The
// package imports only the standard library and the domain.
package importer

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// Formats are the formats Read reads; JSONL and CSV are also what Writer
// writes.
var Formats = []string{JSONL, CSV, "yourls", "yourls-sql", "kutt", "shlink", "bitly"}

// linkgate's own formats.
const (
	JSONL = "jsonl"
	CSV   = "csv"
)

// Known reports whether format is one of Formats.
func Known(format string) bool {
	for _, f := range Formats {
		if f == format {
			return true
		}
	}
	return false
}

// MaxLine bounds one line of the line-based formats (JSON Lines): a link
// with its statistics is a few KiB; a longer line is that line's error.
const MaxLine = 1 << 20

// maxDocument bounds the formats read whole (a Kutt API answer, a
// mysqldump).
const maxDocument = 1 << 34

// Line is the record read from line Line of the input (1-based), or the
// error that line has.
type Line struct {
	Line int
	Rec  shortener.LinkRecord
	Err  error
}

// csvColumns maps a format's column names to the link's fields.
var csvColumns = map[string]map[string][]string{
	CSV:      {"id": {"id"}, "url": {"url"}, "created": {"created_at"}, "expires": {"expires_at"}, "max": {"max_visits"}, "visits": {"visits"}, "total": {"total"}, "domain": {"domain"}},
	"yourls": {"id": {"keyword"}, "url": {"url"}, "created": {"timestamp"}, "visits": {"clicks"}},
	"shlink": {"id": {"shortcode"}, "url": {"longurl"}, "created": {"createdat"}, "visits": {"visits"}},
	"bitly":  {"id": {"link", "bitlink", "id"}, "url": {"long_url", "long url", "destination"}, "created": {"created_at", "created", "date created"}, "visits": {"clicks", "total_clicks", "total clicks", "engagements"}},
}

// Read parses r in format and calls fn per record, in order, until fn
// returns an error (which Read returns).
func Read(format string, r io.Reader, fn func(Line) error) error {
	switch format {
	case "kutt":
		b, err := io.ReadAll(io.LimitReader(r, maxDocument))
		if err != nil {
			return err
		}
		if t := bytes.TrimSpace(b); len(t) > 0 && (t[0] == '[' || bytes.Contains(t[:min(len(t), 200)], []byte(`"data"`))) {
			return readKuttDocument(t, fn) // an API answer, not one link per line
		}
		return readJSONLines(bytes.NewReader(b), fn, kuttLine)
	case JSONL:
		return readJSONLines(r, fn, ParseJSONLine)
	case "yourls-sql":
		return readYOURLSSQL(r, fn)
	}
	cols, ok := csvColumns[format]
	if !ok {
		return fmt.Errorf("unknown format %q: want one of %s", format, strings.Join(Formats, ", "))
	}
	return readCSV(cols, r, fn)
}

// ErrLineTooLong is the error of a line longer than MaxLine.
var ErrLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLine)

// Lines calls fn with each line of r (without its line feed and a
// carriage return before it) and its number, in order, reading at most
// MaxLine bytes of a line: a longer one is passed as nil with
// ErrLineTooLong, and skipped to its end. b is valid only during the
// call. Memory stays bounded by MaxLine whatever r holds.
func Lines(r io.Reader, fn func(n int, b []byte, err error) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte // a line longer than the reader's buffer
	for n := 1; ; n++ {
		b, err := br.ReadSlice('\n')
		tooLong := false
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = br.ReadSlice('\n')
				if !tooLong && len(long)+len(b) <= MaxLine+1 {
					long = append(long, b...)
				} else {
					tooLong = true
				}
			}
			b = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		end := errors.Is(err, io.EOF)
		if end && len(b) == 0 && !tooLong {
			return nil
		}
		b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		if tooLong || len(b) > MaxLine {
			err = fn(n, nil, ErrLineTooLong)
		} else {
			err = fn(n, b, nil)
		}
		if err != nil {
			return err
		}
		if end {
			return nil
		}
		if cap(long) > 64<<10 {
			long = nil // a long line's buffer is not kept for the short ones after it
		}
	}
}

// readJSONLines reads one JSON object per line with parse; blank lines
// are skipped.
func readJSONLines(r io.Reader, fn func(Line) error, parse func([]byte) (shortener.LinkRecord, error)) error {
	return Lines(r, func(n int, b []byte, err error) error {
		if err != nil {
			return fn(Line{Line: n, Err: err})
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			return nil
		}
		l := Line{Line: n}
		l.Rec, l.Err = parse(b)
		return fn(l)
	})
}

// ParseJSONLine reads one line of linkgate's JSON Lines (what Writer
// writes in JSONL): strict (unknown fields are errors), and a valid link.
func ParseJSONLine(b []byte) (shortener.LinkRecord, error) {
	var j Record
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&j); err != nil {
		return shortener.LinkRecord{}, err
	}
	if d.More() {
		return shortener.LinkRecord{}, errors.New("more than one JSON value on the line")
	}
	rec := j.LinkRecord()
	return rec, Check(&rec.Link)
}

// kuttLink is a link as Kutt's API v2 answers it.
type kuttLink struct {
	Address    string  `json:"address"`
	Target     string  `json:"target"`
	VisitCount int64   `json:"visit_count"`
	CreatedAt  string  `json:"created_at"`
	ExpireIn   *string `json:"expire_in"`
}

func kuttLine(b []byte) (shortener.LinkRecord, error) {
	var k kuttLink
	if err := json.Unmarshal(b, &k); err != nil {
		return shortener.LinkRecord{}, err
	}
	return k.record()
}

func (k kuttLink) record() (shortener.LinkRecord, error) {
	r := shortener.LinkRecord{Link: shortener.Link{ID: k.Address, URL: k.Target, Visits: k.VisitCount}}
	var err error
	if r.Link.CreatedAt, err = parseTime(k.CreatedAt); err != nil {
		return r, err
	}
	if k.ExpireIn != nil {
		if r.Link.ExpiresAt, err = parseTime(*k.ExpireIn); err != nil {
			return r, err
		}
	}
	return r, Check(&r.Link)
}

// readKuttDocument reads a Kutt API answer (or its data array); a link's
// "line" is its position in the list.
func readKuttDocument(b []byte, fn func(Line) error) error {
	var doc struct {
		Data []json.RawMessage `json:"data"`
	}
	if b[0] == '[' {
		if err := json.Unmarshal(b, &doc.Data); err != nil {
			return fmt.Errorf("not a Kutt link list: %w", err)
		}
	} else if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("not a Kutt API answer: %w", err)
	}
	for i, raw := range doc.Data {
		l := Line{Line: i + 1}
		l.Rec, l.Err = kuttLine(raw)
		if err := fn(l); err != nil {
			return err
		}
	}
	return nil
}

func readCSV(cols map[string][]string, r io.Reader, fn func(Line) error) error {
	cr := csv.NewReader(bufio.NewReaderSize(r, 64<<10))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = false
	head, err := cr.Read()
	if err != nil {
		return fmt.Errorf("line 1: no header: %w", err)
	}
	at := map[string]int{}
	for field, names := range cols {
		for i, h := range head {
			h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
			for _, n := range names {
				if h == n {
					if _, ok := at[field]; !ok {
						at[field] = i
					}
				}
			}
		}
	}
	if _, ok := at["id"]; !ok {
		return fmt.Errorf("line 1: no id column (one of %q) in the header %q", cols["id"], head)
	}
	if _, ok := at["url"]; !ok {
		return fmt.Errorf("line 1: no URL column (one of %q) in the header %q", cols["url"], head)
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		var l Line
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return err
			}
			l.Line, l.Err = pe.Line, pe.Err
		} else {
			// The record just read has at least one field; asking before
			// the read panicked when the previous one had failed.
			l.Line, _ = cr.FieldPos(0)
			l.Rec, l.Err = csvRecord(at, rec)
		}
		if err := fn(l); err != nil {
			return err
		}
	}
}

func csvRecord(at map[string]int, row []string) (shortener.LinkRecord, error) {
	get := func(f string) string {
		if i, ok := at[f]; ok && i < len(row) {
			return strings.TrimSpace(row[i])
		}
		return ""
	}
	var r shortener.LinkRecord
	l := &r.Link
	l.ID, l.URL = shortener.LinkKey(get("domain"), lastSegment(get("id"))), get("url")
	var err error
	if l.CreatedAt, err = parseTime(get("created")); err != nil {
		return r, err
	}
	if l.ExpiresAt, err = parseTime(get("expires")); err != nil {
		return r, err
	}
	for f, p := range map[string]*int64{"max": &l.MaxVisits, "visits": &l.Visits, "total": &r.Stats.Total} {
		if v := get(f); v != "" {
			if *p, err = strconv.ParseInt(v, 10, 64); err != nil || *p < 0 {
				return r, fmt.Errorf("%s %q is not a count", f, v)
			}
		}
	}
	return r, Check(l)
}

// lastSegment takes the id out of a short link ("bit.ly/abc" → "abc").
func lastSegment(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 && strings.Contains(s, ".") {
		return s[i+1:]
	}
	return s
}

// parseTime reads the times the formats use: RFC 3339, or MySQL's
// "2006-01-02 15:04:05" (taken as UTC); "" is no time.
func parseTime(s string) (time.Time, error) {
	if s == "" || s == "0000-00-00 00:00:00" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05-0700", "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Truncate(time.Second), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q is not RFC 3339 or YYYY-MM-DD HH:MM:SS", s)
}

// Check refuses what cannot be a link: an id linkgate cannot serve (l.ID
// is the store key: the id, after its domain on another than the
// default), a URL that is not an absolute http(s) URL, tags the API would
// refuse (which it normalises).
func Check(l *shortener.Link) error {
	if domain, id := shortener.SplitKey(l.ID); !shortener.ValidID(id) {
		return fmt.Errorf("id %q is not a valid id (1–%d of a-z A-Z 0-9 _ -)", id, shortener.MaxIDLength)
	} else if len(domain) < len(l.ID)-len(id) && !shortener.ValidDomain(domain) {
		return fmt.Errorf("%s: domain %q is not a domain name (at most %d of a-z 0-9 . - :, after IDNA mapping)", id, domain, shortener.MaxDomainLength)
	}
	u, err := url.Parse(l.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: URL %q is not an absolute http(s) URL", l.ID, l.URL)
	}
	tags, err := shortener.ValidateTags(l.Tags)
	if err != nil {
		return fmt.Errorf("%s: %w", l.ID, err)
	}
	l.Tags = tags
	return nil
}
