package importer

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// CSVHeader is the header of linkgate's CSV: the link's fields and its
// visit totals. A link's domain (docs/domains.md) is empty on the default
// domain.
var CSVHeader = []string{"id", "url", "created_at", "expires_at", "max_visits", "visits", "total", "bots", "domain"}

// Record is one line of linkgate's JSON Lines: a link with every field and
// its statistics.
type Record struct {
	ID        string                `json:"id"`
	Domain    string                `json:"domain,omitempty"` // absent: the default domain
	URL       string                `json:"url"`
	CreatedAt *time.Time            `json:"created_at,omitempty"`
	ExpiresAt *time.Time            `json:"expires_at,omitempty"`
	MaxVisits int64                 `json:"max_visits,omitempty"`
	Visits    int64                 `json:"visits,omitempty"` // counted before statistics were kept
	Tags      []string              `json:"tags,omitempty"`
	Forward   *bool                 `json:"forward_query,omitempty"` // absent: the server's --forward-query
	Stats     *shortener.VisitStats `json:"stats,omitempty"`
}

// FromLinkRecord is the line of r, a record as a store exports it (the
// link's store key in its ID).
func FromLinkRecord(r shortener.LinkRecord) Record {
	domain, id := shortener.SplitKey(r.Link.ID)
	j := Record{ID: id, Domain: domain, URL: r.Link.URL, MaxVisits: r.Link.MaxVisits, Visits: r.Link.Visits, Tags: r.Link.Tags}
	if r.Link.ForwardQuery != shortener.ForwardDefault {
		on := r.Link.ForwardQuery == shortener.ForwardOn
		j.Forward = &on
	}
	if !r.Link.CreatedAt.IsZero() {
		j.CreatedAt = &r.Link.CreatedAt
	}
	if !r.Link.ExpiresAt.IsZero() {
		j.ExpiresAt = &r.Link.ExpiresAt
	}
	if r.Stats.Total != 0 || r.Stats.Bots != 0 || len(r.Stats.Days) > 0 {
		j.Stats = &r.Stats
	}
	return j
}

// LinkRecord is the record of the line, as a store imports it (times to
// the second, in UTC). It is not checked: see Check.
func (j Record) LinkRecord() shortener.LinkRecord {
	r := shortener.LinkRecord{Link: shortener.Link{ID: shortener.LinkKey(j.Domain, j.ID), URL: j.URL, MaxVisits: j.MaxVisits, Visits: j.Visits, Tags: j.Tags}}
	switch {
	case j.Forward == nil:
	case *j.Forward:
		r.Link.ForwardQuery = shortener.ForwardOn
	default:
		r.Link.ForwardQuery = shortener.ForwardOff
	}
	if j.CreatedAt != nil {
		r.Link.CreatedAt = j.CreatedAt.UTC().Truncate(time.Second)
	}
	if j.ExpiresAt != nil {
		r.Link.ExpiresAt = j.ExpiresAt.UTC().Truncate(time.Second)
	}
	if j.Stats != nil {
		r.Stats = *j.Stats
	}
	return r
}

// Writer writes records in one of linkgate's formats, JSONL or CSV,
// through a buffer: Flush at the end.
type Writer struct {
	bw  *bufio.Writer
	enc *json.Encoder
	cw  *csv.Writer // nil: JSON Lines
	n   int
}

// NewWriter returns a Writer of format (JSONL or CSV) to w. A CSV starts
// with its header.
func NewWriter(format string, w io.Writer) (*Writer, error) {
	x := &Writer{bw: bufio.NewWriterSize(w, 64<<10)}
	switch format {
	case JSONL:
		x.enc = json.NewEncoder(x.bw)
		x.enc.SetEscapeHTML(false)
	case CSV:
		x.cw = csv.NewWriter(x.bw)
		if err := x.cw.Write(CSVHeader); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("export format %q: want jsonl or csv", format)
	}
	return x, nil
}

// Write writes r, a record as a store exports it.
func (x *Writer) Write(r shortener.LinkRecord) error {
	x.n++
	if x.cw == nil {
		return x.enc.Encode(FromLinkRecord(r))
	}
	domain, id := shortener.SplitKey(r.Link.ID)
	return x.cw.Write([]string{id, r.Link.URL, csvTime(r.Link.CreatedAt), csvTime(r.Link.ExpiresAt),
		strconv.FormatInt(r.Link.MaxVisits, 10), strconv.FormatInt(r.Link.Visits, 10),
		strconv.FormatInt(r.Stats.Total, 10), strconv.FormatInt(r.Stats.Bots, 10), domain})
}

// Count is how many records were written.
func (x *Writer) Count() int { return x.n }

// Flush writes what is buffered.
func (x *Writer) Flush() error {
	var err error
	if x.cw != nil {
		x.cw.Flush()
		err = x.cw.Error()
	}
	return errors.Join(err, x.bw.Flush())
}

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
