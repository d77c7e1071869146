package shortener

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultIDAttempts is how many fresh ids Create tries before giving up with
// Unavailable. With 62^10 ids a second attempt is already astronomically rare.
const DefaultIDAttempts = 5

// Service is the shortener's behaviour over a Store: it validates input,
// generates ids (retrying on conflict), and enforces expiry and visit limits
// on reads. HTTP and Lambda front ends call it; it knows nothing of either.
type Service struct {
	store    Store
	policy   URLPolicy
	now      func() time.Time
	newID    func() (string, error)
	attempts int
	visits   VisitCounter // nil: visits are not counted
}

// Options configure a Service. Zero fields take defaults.
type Options struct {
	Policy     URLPolicy              // which target URLs are accepted
	Now        func() time.Time       // clock; default time.Now
	NewID      func() (string, error) // id generator; default NewID
	IDAttempts int                    // ids tried per create; default DefaultIDAttempts
	// Visits, if set, holds the visits recorded but not yet stored: visit
	// limits are enforced on the live count (stored plus pending).
	Visits VisitCounter
}

// NewService returns a Service over store.
func NewService(store Store, opts Options) *Service {
	s := &Service{store: store, policy: opts.Policy, now: opts.Now, newID: opts.NewID, attempts: opts.IDAttempts, visits: opts.Visits}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = NewID
	}
	if s.attempts <= 0 {
		s.attempts = DefaultIDAttempts
	}
	return s
}

// Policy returns the URL policy the Service enforces.
func (s *Service) Policy() URLPolicy { return s.policy }

// CreateRequest is a request for a new link.
type CreateRequest struct {
	URL          string    // target; checked against the URLPolicy
	Slug         string    // custom id; "" generates one
	ExpiresAt    time.Time // zero: never expires; else must be in the future
	MaxVisits    int64     // 0: unlimited; negative is invalid
	Tags         []string  // see ValidateTags
	ForwardQuery Forward   // ForwardDefault: as the server is configured
	Domain       string    // the link's domain: "" the default, else a ValidDomain
	Host         string    // Host the request arrived with, for the self-reference check
}

// check validates the fields a create or an edit sets (nil: not set) and
// puts them in their stored form: one set of rules for both. host is the
// request's Host, for the self-reference check.
func (s *Service) check(now time.Time, u *LinkUpdate, host string) error {
	if u.URL != nil {
		if err := s.policy.Check(*u.URL, host); err != nil {
			return err
		}
	}
	if u.MaxVisits != nil && *u.MaxVisits < 0 {
		return Errorf(InvalidParameter, "max_visits must be 0 (unlimited) or more")
	}
	if u.ExpiresAt != nil && !u.ExpiresAt.IsZero() {
		t := u.ExpiresAt.UTC().Truncate(time.Second)
		if !t.After(now) {
			return Errorf(InvalidParameter, "expires_at must be in the future")
		}
		u.ExpiresAt = &t
	}
	if u.Tags != nil {
		tags, err := ValidateTags(*u.Tags)
		if err != nil {
			return err
		}
		u.Tags = &tags
	}
	if u.ForwardQuery != nil && *u.ForwardQuery > ForwardOff {
		return Errorf(InvalidParameter, "unknown forward_query setting %d", *u.ForwardQuery)
	}
	return nil
}

// Create validates req and stores a new link. A custom slug that is taken
// gives ErrConflict; a generated id that collides is replaced by a fresh one
// up to the configured number of attempts, then Unavailable. The returned
// link is durable.
func (s *Service) Create(ctx context.Context, req CreateRequest) (Link, error) {
	now := s.now().UTC().Truncate(time.Second)
	f := LinkUpdate{URL: &req.URL, ExpiresAt: &req.ExpiresAt, MaxVisits: &req.MaxVisits, Tags: &req.Tags, ForwardQuery: &req.ForwardQuery}
	if err := s.check(now, &f, req.Host); err != nil {
		return Link{}, err
	}
	if req.Domain != "" && !ValidDomain(req.Domain) {
		return Link{}, Errorf(InvalidParameter, "invalid domain %q", req.Domain)
	}
	l := Link{CreatedAt: now, Domain: req.Domain}
	f.Apply(&l)
	if req.Slug != "" {
		if err := ValidateSlug(req.Slug); err != nil {
			return Link{}, err
		}
		l.ID = req.Slug
		if err := s.store.Create(ctx, toStore(l)); err != nil {
			if errors.Is(err, ErrConflict) {
				return Link{}, &Error{Code: Conflict, Message: fmt.Sprintf("slug %q is already taken", req.Slug), Err: err}
			}
			return Link{}, storeError("create link", err)
		}
		return l, nil
	}
	for range s.attempts {
		id, err := s.newID()
		if err != nil {
			return Link{}, &Error{Code: Internal, Message: "could not generate an id", Err: err}
		}
		l.ID = id
		err = s.store.Create(ctx, toStore(l))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrConflict) {
			return Link{}, storeError("create link", err)
		}
	}
	return Link{}, &Error{Code: Unavailable, Message: "could not find a free id, retry later",
		Err: fmt.Errorf("%d generated ids in a row were taken", s.attempts)}
}

// Get returns the link id of domain ("": the default) as stored, expired
// or not (for the API's link view). Malformed ids and domains answer
// ErrNotFound without a store call.
func (s *Service) Get(ctx context.Context, domain, id string) (Link, error) {
	key, ok := checkedKey(domain, id)
	if !ok {
		return Link{}, ErrNotFound
	}
	l, err := s.store.Get(ctx, key)
	if err != nil {
		return Link{}, storeError("get link", err)
	}
	return fromStore(l), nil
}

// checkedKey returns the key of the link id on domain, and false when
// either is malformed.
func checkedKey(domain, id string) (string, bool) {
	if !ValidID(id) || domain != "" && !ValidDomain(domain) {
		return "", false
	}
	return LinkKey(domain, id), true
}

// Resolve returns the link id of domain if it may be followed now:
// ErrNotFound for an unknown (or malformed) id, ErrExpired when it has
// expired or used up its visit limit.
func (s *Service) Resolve(ctx context.Context, domain, id string) (Link, error) {
	l, err := s.Get(ctx, domain, id)
	if err != nil {
		return Link{}, err
	}
	s.addPending(&l, []byte(l.Key()))
	if s.expired(l) {
		return Link{}, ErrExpired
	}
	return l, nil
}

// AppendResolve is Resolve for the redirect hot path: it appends the URL of
// the link under key (AppendKey: the id, after its domain on another
// domain than the default) to dst and returns the extended buffer, without
// allocating (the store's AppendURL), and the link's fields
// other than ID, Domain and URL (a redirect records a visit of a link with
// a visit limit as such). Errors are Resolve's. key is not retained.
func (s *Service) AppendResolve(ctx context.Context, dst, key []byte) ([]byte, Link, error) {
	if !ValidKey(key) {
		return dst, Link{}, ErrNotFound
	}
	n := len(dst)
	dst, l, err := s.store.AppendURL(ctx, dst, key)
	if err != nil {
		return dst[:n], Link{}, storeError("get link", err)
	}
	s.addPending(&l, key)
	if s.expired(l) {
		return dst[:n], Link{}, ErrExpired
	}
	return dst, l, nil
}

// addPending makes a visit limit count the visits not yet stored; it is
// called after the store read (see VisitCounter.Pending). key is the
// link's.
func (s *Service) addPending(l *Link, key []byte) {
	if l.MaxVisits > 0 && s.visits != nil {
		l.Visits += s.visits.Pending(key)
	}
}

// expired reads the clock only for links that can expire.
func (s *Service) expired(l Link) bool {
	return (l.MaxVisits > 0 || !l.ExpiresAt.IsZero()) && l.Expired(s.now())
}

// Update validates u as Create validates a new link's fields and applies
// it to the link id of domain, keeping its id, domain, creation time and
// statistics (an edit never moves a link to another domain: its short
// link, printed or shared, would stop working). It returns the link as
// stored after the edit; ErrNotFound if there is none. host is the
// request's Host, for the self-reference check.
func (s *Service) Update(ctx context.Context, domain, id string, u LinkUpdate, host string) (Link, error) {
	key, ok := checkedKey(domain, id)
	if !ok {
		return Link{}, ErrNotFound
	}
	if err := s.check(s.now().UTC().Truncate(time.Second), &u, host); err != nil {
		return Link{}, err
	}
	if u == (LinkUpdate{}) {
		return s.Get(ctx, domain, id) // nothing to change
	}
	l, err := s.store.Update(ctx, key, u)
	if err != nil {
		return Link{}, storeError("update link", err)
	}
	return fromStore(l), nil
}

// Delete removes the link id of domain; ErrNotFound if there is none. A
// link of the same id on another domain stays.
func (s *Service) Delete(ctx context.Context, domain, id string) error {
	key, ok := checkedKey(domain, id)
	if !ok {
		return ErrNotFound
	}
	if err := s.store.Delete(ctx, key); err != nil {
		return storeError("delete link", err)
	}
	return nil
}

// List returns one page of links, of every domain. limit must be
// 1..MaxPageSize.
func (s *Service) List(ctx context.Context, cursor string, limit int) (Page, error) {
	if limit < 1 || limit > MaxPageSize {
		return Page{}, Errorf(InvalidParameter, "limit must be between 1 and %d", MaxPageSize)
	}
	p, err := s.store.List(ctx, cursor, limit)
	if err != nil {
		return Page{}, storeError("list links", err)
	}
	for i := range p.Links {
		p.Links[i] = fromStore(p.Links[i])
	}
	return p, nil
}

// Ready reports whether the store answers.
func (s *Service) Ready(ctx context.Context) error {
	if err := s.store.Ping(ctx); err != nil {
		return storeError("ping store", err)
	}
	return nil
}

// storeError keeps domain errors as they are and reports anything else a
// store returned as Unavailable, with the cause kept for the logs.
func storeError(op string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return &Error{Code: Unavailable, Message: "store unavailable, retry later", Err: fmt.Errorf("%s: %w", op, err)}
}
