package shortener

import (
	"context"
	"fmt"
	"time"
)

// Store keeps links, their visit statistics, the API keys and the domain
// registry: every capability a store has, in one interface, so the type
// system says what a store can do and nothing checks it at run time. Implementations (pebble,
// dynamodb) must be safe for concurrent use and pass storetest.Run;
// decorators (the read cache, storemetrics) embed the Store they wrap and
// override only what they change. Two capabilities are optional, because
// the DynamoDB store lacks them: Finder (an indexed, filtered list) and
// VisitRangeStore (statistics by range).
//
// Errors: return errors that match the domain sentinels with errors.Is
// (ErrNotFound, ErrConflict, ErrUnavailable), wrapping the driver's error for
// the logs. A failure to reach the backend (timeout, throttling, I/O error)
// should match ErrUnavailable; the Service reports any other store error as
// Unavailable too, so an adapter never needs to invent codes. Never panic.
type Store interface {
	// Create stores l under l.ID if, and only if, no link with that id
	// exists, and returns nil only once the link is durable (a later Get,
	// after a crash, finds it). If the id is taken — even by an expired
	// link — it stores nothing and returns an error matching ErrConflict.
	// l has been validated by the Service; stores keep every field as given.
	Create(ctx context.Context, l Link) error

	// Get returns the link stored under id, or an error matching
	// ErrNotFound. It returns expired links as they are stored (with their
	// ExpiresAt, MaxVisits and Visits): the Service enforces expiry and
	// visit limits on every read. A store whose backend deletes expired
	// items by itself (DynamoDB TTL) may answer ErrNotFound for them once
	// they are gone. Any id that is not stored, however malformed, simply
	// answers ErrNotFound.
	Get(ctx context.Context, id string) (Link, error)

	// Delete removes the link under id, or returns an error matching
	// ErrNotFound if there is none. Once it returns nil, Get answers
	// ErrNotFound (decorators such as caches invalidate before returning).
	Delete(ctx context.Context, id string) error

	// List returns up to limit links (1 ≤ limit ≤ MaxPageSize) starting at
	// cursor ("" for the first page). Page.Next is the cursor of the next
	// page, "" after the last one. The order is the store's own; every link
	// that exists for the whole listing appears exactly once across pages.
	// Cursors are opaque to callers; one the store did not produce gives an
	// error with Code InvalidParameter.
	List(ctx context.Context, cursor string, limit int) (Page, error)

	// Ping reports whether the store answers (used by /readyz): nil, or an
	// error matching ErrUnavailable.
	Ping(ctx context.Context) error

	// Close releases the store. It is called once, after every other call
	// has returned; nothing is called after it.
	Close() error

	URLAppender
	Updater
	RecordStore
	KeyStore
	DomainStore
	VisitStore
}

// MaxPageSize bounds List's limit.
const MaxPageSize = 1000

// Page is one page of a listing.
type Page struct {
	Links []Link
	Next  string // cursor of the next page; "" when this is the last
	// Scanned, if not 0, says the page stopped early, at the Finder's
	// budget, after reading that many links: it may hold fewer links
	// than asked, none even, and Next goes on from the last link read.
	Scanned int
}

// URLAppender is the Store's lookup for the redirect hot path, which
// should not allocate.
type URLAppender interface {
	// AppendURL looks id up as Get does, with the same errors, and appends
	// the link's URL to dst. It returns the extended buffer and the link's
	// other fields (ID and URL left empty). It must not retain id or dst:
	// id may alias a request buffer that is reused after the call.
	AppendURL(ctx context.Context, dst, id []byte) ([]byte, Link, error)
}

// LinkUpdate is an edit of a link: each non-nil field is the new value
// of that field (a zero ExpiresAt: never; a zero MaxVisits: unlimited; an
// empty Tags: none). ID, CreatedAt, Visits and the statistics are never
// edited.
type LinkUpdate struct {
	URL          *string
	ExpiresAt    *time.Time
	MaxVisits    *int64
	Tags         *[]string
	ForwardQuery *Forward
}

// Apply sets l's fields to the update's.
func (u LinkUpdate) Apply(l *Link) {
	if u.URL != nil {
		l.URL = *u.URL
	}
	if u.ExpiresAt != nil {
		l.ExpiresAt = *u.ExpiresAt
	}
	if u.MaxVisits != nil {
		l.MaxVisits = *u.MaxVisits
	}
	if u.Tags != nil {
		l.Tags = *u.Tags
		if len(l.Tags) == 0 {
			l.Tags = nil
		}
	}
	if u.ForwardQuery != nil {
		l.ForwardQuery = *u.ForwardQuery
	}
}

// Updater is the Store's edit of links in place.
type Updater interface {
	// Update applies u to the link under id as one atomic step and
	// returns the link as stored after it, or an error matching
	// ErrNotFound if there is none. It never creates a link: an update
	// racing with a Delete either happens before it (and is deleted) or
	// finds nothing. Two concurrent updates of different fields both take
	// effect, and visits recorded meanwhile are kept. Once it returns,
	// Get answers the new fields (decorators such as caches update
	// themselves before returning). u has been validated by the Service.
	Update(ctx context.Context, id string, u LinkUpdate) (Link, error)
}

// LinkRecord is a link with its visit statistics: what exports, imports
// and migrations carry. Stats are the visits stored for the link; the
// Visits it was created with stay in Link.Visits.
type LinkRecord struct {
	Link  Link
	Stats VisitStats
}

// ImportResult says what RecordStore.ImportRecords did with one record.
type ImportResult uint8

const (
	Imported    ImportResult = iota // stored
	Unchanged                       // the same link was stored already (an import run again)
	Conflicting                     // another link holds the id: nothing stored
)

// ImportOver says what importing l does when stored, the Link a
// RecordStore exports, holds its id already: Unchanged when they are the
// same link (an import run again), else Conflicting.
func ImportOver(stored, l Link) ImportResult {
	if stored.URL == l.URL && stored.CreatedAt.Equal(l.CreatedAt) && stored.ExpiresAt.Equal(l.ExpiresAt) &&
		stored.MaxVisits == l.MaxVisits && stored.Visits == l.Visits {
		return Unchanged
	}
	return Conflicting
}

// RecordStore is the Store's part for backups in a portable form,
// imports and migrations: whole links with their statistics.
type RecordStore interface {
	// ExportRecords calls fn with every link and its statistics, in the
	// store's order, until fn returns an error (which it returns).
	ExportRecords(ctx context.Context, fn func(LinkRecord) error) error
	// ImportRecords stores each record whose id is free, the link and its
	// statistics in one write, and says per record what it did. The ids
	// are ValidID. A store writes a call's records all at once where it
	// can (pebble does); one that cannot (DynamoDB: transactions of up to
	// 100 items) may have written some when it returns an error, and an
	// import run again reports those Unchanged. A link is never written
	// without its statistics. A record the store cannot keep at all is
	// refused before anything of the call is written, with a *RecordError.
	ImportRecords(ctx context.Context, recs []LinkRecord) ([]ImportResult, error)
}

// RecordError is ImportRecords' error for a record the store cannot keep
// (on DynamoDB, a link over the 400 KB item limit). Nothing of the call was
// written: an import reports the record and imports the others without it.
type RecordError struct {
	Index int // the record's place in the call's recs
	Err   error
}

func (e *RecordError) Error() string { return fmt.Sprintf("record %d: %v", e.Index, e.Err) }

func (e *RecordError) Unwrap() error { return e.Err }
