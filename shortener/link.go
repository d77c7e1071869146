package shortener

import "time"

// Link is a short link: the id in its path and the URL it redirects to.
//
// Times have one-second precision (the Service truncates them) and are in
// UTC, so every store round-trips them exactly.
type Link struct {
	ID        string    // generated id or custom slug; see ValidID
	URL       string    // target, validated by URLPolicy when created
	CreatedAt time.Time // when it was created
	ExpiresAt time.Time // after this instant it answers 410; zero: never
	MaxVisits int64     // visit limit, 0: unlimited
	Visits    int64     // visits recorded in the store so far
}

// Expired reports whether the link no longer redirects at now: its expiry
// has passed, or it has used up its visit limit.
func (l Link) Expired(now time.Time) bool {
	if !l.ExpiresAt.IsZero() && !now.Before(l.ExpiresAt) {
		return true
	}
	return l.MaxVisits > 0 && l.Visits >= l.MaxVisits
}
