package shortener

import "time"

// Link is a short link: the id in its path and the URL it redirects to.
//
// Times have one-second precision (the Service truncates them) and are in
// UTC, so every store round-trips them exactly.
type Link struct {
	ID string // generated id or custom slug; see ValidID
	// Domain is the short-link domain the link belongs to (domain.go):
	// "" the server's default domain, else a ValidDomain. Two links on
	// two domains may have the same ID.
	Domain    string
	URL       string    // target, validated by URLPolicy when created or edited
	CreatedAt time.Time // when it was created
	ExpiresAt time.Time // after this instant it answers 410; zero: never
	MaxVisits int64     // visit limit, 0: unlimited
	Visits    int64     // visits recorded in the store so far
	// Tags label the link for listing (ValidateTags: sorted, distinct);
	// nil: none. The redirect path never reads them.
	Tags []string
	// ForwardQuery says whether a visitor's query string is added to the
	// target (AppendForwardQuery); ForwardDefault follows the server's
	// setting.
	ForwardQuery Forward
}

// Forward is a link's query-forwarding setting.
type Forward uint8

const (
	ForwardDefault Forward = iota // as the server is configured (--forward-query)
	ForwardOn                     // the visitor's query string is added to the target
	ForwardOff                    // the target is used as it is
)

// Enabled reports whether a link with this setting forwards the query
// string on a server whose default is def.
func (f Forward) Enabled(def bool) bool {
	return f == ForwardOn || f == ForwardDefault && def
}

// Expired reports whether the link no longer redirects at now: its expiry
// has passed, or it has used up its visit limit.
func (l Link) Expired(now time.Time) bool {
	if !l.ExpiresAt.IsZero() && !now.Before(l.ExpiresAt) {
		return true
	}
	return l.MaxVisits > 0 && l.Visits >= l.MaxVisits
}
