//go:build !nopebble

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener"
)

// Import formats. Besides linkgate's own (jsonl, csv: what export
// writes), the formats people migrate from, as those projects define them:
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
var importFormats = []string{"jsonl", "csv", "yourls", "yourls-sql", "kutt", "shlink", "bitly"}

// csvColumns maps a format's column names to the link's fields.
var csvColumns = map[string]map[string][]string{
	"csv":    {"id": {"id"}, "url": {"url"}, "created": {"created_at"}, "expires": {"expires_at"}, "max": {"max_visits"}, "visits": {"visits"}, "total": {"total"}, "domain": {"domain"}},
	"yourls": {"id": {"keyword"}, "url": {"url"}, "created": {"timestamp"}, "visits": {"clicks"}},
	"shlink": {"id": {"shortcode"}, "url": {"longurl"}, "created": {"createdat"}, "visits": {"visits"}},
	"bitly":  {"id": {"link", "bitlink", "id"}, "url": {"long_url", "long url", "destination"}, "created": {"created_at", "created", "date created"}, "visits": {"clicks", "total_clicks", "total clicks", "engagements"}},
}

// importLine is a record read from line Line of the input, or the error
// that line has.
type importLine struct {
	Line int
	Rec  shortener.LinkRecord
	Err  error
}

func runStoreImport(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("store import", "linkgate store import [--store STORE] [--format F] [FILE]",
		`Import links (with their statistics, from linkgate's own format) from
FILE or standard input. Formats: `+strings.Join(importFormats, ", ")+`.
Idempotent: a link already there, unchanged, is counted as such; an id
holding another link is a conflict, reported with its line and left as it
is; a line that is not a valid link is reported with its line and
skipped. Links are written in synced batches, each link with its
statistics at once: an interrupted import is safe to run again. Exit
status 1 if any line was refused.`, env.Stderr)
	store := fs.String("store", "pebble:data/links", "the `STORE`: pebble:DIR or dynamodb:TABLE")
	format := fs.String("format", "jsonl", "input `format`")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	known := false
	for _, f := range importFormats {
		known = known || f == *format
	}
	if !known || fs.NArg() > 1 {
		return cli.Usagef("store import: --format one of %s, at most one FILE", strings.Join(importFormats, ", "))
	}
	in := env.Stdin
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	s, err := openRecordStore(ctx, *store)
	if err != nil {
		return err
	}
	defer s.Close()
	var c importCounts
	batch := make([]importLine, 0, migrateBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		recs := make([]shortener.LinkRecord, len(batch))
		for i := range batch {
			recs[i] = batch[i].Rec
		}
		res, err := s.(shortener.RecordStore).ImportRecords(ctx, recs)
		// A record the store cannot keep was refused with nothing written:
		// its line is reported, and the others are imported without it.
		for re := (*shortener.RecordError)(nil); errors.As(err, &re) && re.Index >= 0 && re.Index < len(recs); {
			c.bad++
			fmt.Fprintf(env.Stderr, "line %d: %v\n", batch[re.Index].Line, re.Err)
			recs = slices.Delete(recs, re.Index, re.Index+1)
			batch = slices.Delete(batch, re.Index, re.Index+1)
			res, err = s.(shortener.RecordStore).ImportRecords(ctx, recs)
		}
		if err != nil {
			return err
		}
		for i, r := range res {
			switch r {
			case shortener.Imported:
				c.imported++
			case shortener.Unchanged:
				c.unchanged++
			default:
				c.conflicts++
				fmt.Fprintf(env.Stderr, "line %d: conflict: %s holds another link; left as it is\n", batch[i].Line, batch[i].Rec.Link.ID)
			}
		}
		batch = batch[:0]
		return nil
	}
	err = readImport(*format, in, func(l importLine) error {
		if l.Err != nil {
			c.bad++
			fmt.Fprintf(env.Stderr, "line %d: %v\n", l.Line, l.Err)
			return nil
		}
		batch = append(batch, l)
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	fmt.Fprintf(env.Stdout, "%d imported, %d already there, %d conflicting, %d bad lines\n", c.imported, c.unchanged, c.conflicts, c.bad)
	if table, ok := strings.CutPrefix(*store, "dynamodb:"); ok && c.imported > 0 {
		fmt.Fprintf(env.Stderr, "visit statistics went to the table's visit log: the instances serving it fold them within the hour, or now: linkgate dynamodb fold-visits --table %s\n", table)
	}
	if err != nil {
		return fmt.Errorf("store import: %w", err)
	}
	if c.conflicts+c.bad > 0 {
		return fmt.Errorf("store import: %d lines refused", c.conflicts+c.bad)
	}
	return nil
}

type importCounts struct{ imported, unchanged, conflicts, bad int }

// maxImportLine bounds one input line (a link is a few KiB at most).
const maxImportLine = 1 << 20

// readImport parses r in format and calls fn per line, in order.
func readImport(format string, r io.Reader, fn func(importLine) error) error {
	switch format {
	case "kutt":
		b, err := io.ReadAll(io.LimitReader(r, 1<<34))
		if err != nil {
			return err
		}
		if t := bytes.TrimSpace(b); len(t) > 0 && (t[0] == '[' || bytes.Contains(t[:min(len(t), 200)], []byte(`"data"`))) {
			return readKuttDocument(t, fn) // an API answer, not one link per line
		}
		return readJSONLines(format, bytes.NewReader(b), fn)
	case "jsonl":
		return readJSONLines(format, r, fn)
	case "yourls-sql":
		return readYOURLSSQL(r, fn)
	default:
		return readCSV(csvColumns[format], r, fn)
	}
}

func readJSONLines(format string, r io.Reader, fn func(importLine) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxImportLine)
	for n := 1; sc.Scan(); n++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var l importLine
		l.Line = n
		if format == "kutt" {
			var k kuttLink
			if l.Err = json.Unmarshal([]byte(b), &k); l.Err == nil {
				l.Rec, l.Err = k.record()
			}
		} else {
			var j recordJSON
			d := json.NewDecoder(strings.NewReader(b))
			d.DisallowUnknownFields()
			if l.Err = d.Decode(&j); l.Err == nil {
				l.Rec = j.record()
				l.Err = checkLink(&l.Rec.Link)
			}
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return sc.Err()
}

// kuttLink is a link as Kutt's API v2 answers it.
type kuttLink struct {
	Address    string  `json:"address"`
	Target     string  `json:"target"`
	VisitCount int64   `json:"visit_count"`
	CreatedAt  string  `json:"created_at"`
	ExpireIn   *string `json:"expire_in"`
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
	return r, checkLink(&r.Link)
}

// readKuttDocument reads a Kutt API answer (or its data array); a link's
// "line" is its position in the list.
func readKuttDocument(b []byte, fn func(importLine) error) error {
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
		l := importLine{Line: i + 1}
		var k kuttLink
		if l.Err = json.Unmarshal(raw, &k); l.Err == nil {
			l.Rec, l.Err = k.record()
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return nil
}

func readCSV(cols map[string][]string, r io.Reader, fn func(importLine) error) error {
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
		var l importLine
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
	return r, checkLink(l)
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

// checkLink refuses what cannot be a link: an id linkgate cannot serve
// (l.ID is the store key: the id, after its domain on another than the
// default), a URL that is not an absolute http(s) URL.
func checkLink(l *shortener.Link) error {
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

// yourlsColumns is the yourls_url table's column order (YOURLS's
// install schema), used when an INSERT names no columns.
var yourlsColumns = []string{"keyword", "url", "title", "timestamp", "ip", "clicks"}

// readYOURLSSQL reads the rows of the INSERT INTO yourls_url statements
// of a mysqldump (other tables' statements are skipped).
func readYOURLSSQL(r io.Reader, fn func(importLine) error) error {
	b, err := io.ReadAll(io.LimitReader(r, 1<<34))
	if err != nil {
		return err
	}
	p := sqlParser{b: b, lower: bytes.ToLower(b), line: 1}
	for {
		i := p.find("insert into")
		if i < 0 {
			return nil
		}
		p.advance(i + len("insert into"))
		p.space()
		table := p.ident()
		p.space()
		cols := yourlsColumns
		if p.peek() == '(' {
			p.i++
			cols = nil
			for p.space(); p.peek() != ')'; p.space() {
				c := p.ident()
				if c == "" { // the end of the input, or not a name
					return fmt.Errorf("line %d: INSERT INTO %s: want a column name or )", p.line, table)
				}
				cols = append(cols, strings.ToLower(c))
				p.space()
				if p.peek() == ',' {
					p.i++
				}
			}
			p.i++
			p.space()
		}
		if !strings.HasSuffix(strings.ToLower(table), "_url") && !strings.EqualFold(table, "url") {
			continue // another table's rows
		}
		if p.find("values") != 0 {
			return fmt.Errorf("line %d: INSERT INTO %s without VALUES", p.line, table)
		}
		p.advance(len("values"))
		for {
			p.space()
			if p.peek() != '(' {
				return fmt.Errorf("line %d: want a row in parentheses", p.line)
			}
			line := p.line
			vals, err := p.row()
			l := importLine{Line: line, Err: err}
			if err == nil {
				l.Rec, l.Err = yourlsRecord(cols, vals)
			}
			if err := fn(l); err != nil {
				return err
			}
			if err != nil {
				return fmt.Errorf("line %d: %w", line, err) // the statement cannot be read on
			}
			p.space()
			if p.peek() == ',' {
				p.i++
				continue
			}
			break
		}
	}
}

func yourlsRecord(cols, vals []string) (shortener.LinkRecord, error) {
	at := map[string]int{}
	for i, c := range cols {
		at[c] = i
	}
	get := func(c string) string {
		if i, ok := at[c]; ok && i < len(vals) {
			return vals[i]
		}
		return ""
	}
	r := shortener.LinkRecord{Link: shortener.Link{ID: get("keyword"), URL: get("url")}}
	var err error
	if r.Link.CreatedAt, err = parseTime(get("timestamp")); err != nil {
		return r, err
	}
	if c := get("clicks"); c != "" {
		if r.Link.Visits, err = strconv.ParseInt(c, 10, 64); err != nil || r.Link.Visits < 0 {
			return r, fmt.Errorf("clicks %q is not a count", c)
		}
	}
	return r, checkLink(&r.Link)
}

type sqlParser struct {
	b, lower []byte
	i        int
	line     int
}

func (p *sqlParser) advance(n int) {
	for _, c := range p.b[p.i : p.i+n] {
		if c == '\n' {
			p.line++
		}
	}
	p.i += n
}

func (p *sqlParser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *sqlParser) space() {
	for p.i < len(p.b) && strings.IndexByte(" \t\r\n", p.b[p.i]) >= 0 {
		p.advance(1)
	}
}

// ident reads a name, `quoted` or bare.
func (p *sqlParser) ident() string {
	if p.peek() == '`' {
		j := strings.IndexByte(string(p.b[p.i+1:]), '`')
		if j < 0 {
			p.i = len(p.b)
			return ""
		}
		s := string(p.b[p.i+1 : p.i+1+j])
		p.advance(j + 2)
		return s
	}
	start := p.i
	for p.i < len(p.b) && (p.b[p.i] == '_' || p.b[p.i] == '.' || 'a' <= p.b[p.i]|0x20 && p.b[p.i]|0x20 <= 'z' || '0' <= p.b[p.i] && p.b[p.i] <= '9') {
		p.i++
	}
	return string(p.b[start:p.i])
}

// row reads (v, v, …): quoted strings with MySQL's escapes, numbers, NULL.
func (p *sqlParser) row() ([]string, error) {
	p.i++ // (
	var vals []string
	for {
		p.space()
		switch c := p.peek(); {
		case c == '\'':
			p.i++
			var s strings.Builder
			for {
				if p.i >= len(p.b) {
					return nil, errors.New("unterminated string")
				}
				c := p.b[p.i]
				switch {
				case c == '\\' && p.i+1 < len(p.b):
					s.WriteByte(unescape(p.b[p.i+1]))
					p.advance(2)
					continue
				case c == '\'' && p.i+1 < len(p.b) && p.b[p.i+1] == '\'':
					s.WriteByte('\'')
					p.advance(2)
					continue
				case c == '\'':
					p.i++
				default:
					s.WriteByte(c)
					p.advance(1)
					continue
				}
				break
			}
			vals = append(vals, s.String())
		default:
			start := p.i
			for p.i < len(p.b) && p.b[p.i] != ',' && p.b[p.i] != ')' {
				p.advance(1)
			}
			v := strings.TrimSpace(string(p.b[start:p.i]))
			if strings.EqualFold(v, "null") {
				v = ""
			}
			vals = append(vals, v)
		}
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case ')':
			p.i++
			return vals, nil
		default:
			return nil, fmt.Errorf("unexpected %q in a row", p.peek())
		}
	}
}

// unescape is MySQL's backslash escape of c.
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case '0':
		return 0
	case 'Z':
		return 26
	}
	return c
}

// find returns the offset of the keyword s (lower case) from p.i on in
// the dump, case folded, or -1.
func (p *sqlParser) find(s string) int {
	return bytes.Index(p.lower[p.i:], []byte(s))
}
