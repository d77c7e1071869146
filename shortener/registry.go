package shortener

import (
	"context"
	"time"
)

// The domain registry: short-link domains added at run time (the admin
// API's /api/v1/domains), beside the ones a server is started with. The
// store keeps them, so every instance on one store serves the same set:
// each reads it again within its refresh interval (docs/domains.md).

// Domain is a domain of the registry.
type Domain struct {
	// Host is the domain as a Host header names it: a ValidDomain
	// (canonical host name, A-labels in lower case) with an optional
	// port.
	Host string
	// Scheme is that of its short links: "https" or "http".
	Scheme    string
	CreatedAt time.Time
}

// MaxRegisteredDomains bounds the registry: every instance reads it
// whole every few seconds (DynamoDB: one item, 256 entries of 40 bytes
// are 3 read units).
const MaxRegisteredDomains = 256

// ValidRegisteredDomain reports whether d can be stored: a ValidDomain
// host and a scheme of http or https.
func ValidRegisteredDomain(d Domain) bool {
	return ValidDomain(d.Host) && (d.Scheme == "https" || d.Scheme == "http")
}

// DomainStore is the Store's part that keeps the registry, in the same
// database as the links. Every store passes the registry cases of
// storetest.
type DomainStore interface {
	// AddDomain stores d unless its Host is there (ErrConflict), or
	// the registry holds MaxRegisteredDomains (an error with Code
	// InvalidParameter). It returns once d is durable.
	AddDomain(ctx context.Context, d Domain) error
	// Domains returns the registry, by Host. Reads are strongly
	// consistent where the backend offers a choice.
	Domains(ctx context.Context) ([]Domain, error)
	// DeleteDomain removes the domain host (ErrNotFound if none).
	DeleteDomain(ctx context.Context, host string) error
}

// CountDomainLinks returns how many links domain (a Link.Domain, not
// the default "") has, reading every link of the store once.
func (s *Service) CountDomainLinks(ctx context.Context, domain string) (int, error) {
	if !ValidDomain(domain) {
		return 0, Errorf(InvalidParameter, "invalid domain %q", domain)
	}
	n, next := 0, ""
	for {
		p, err := s.store.List(ctx, next, MaxPageSize)
		if err != nil {
			return 0, storeError("count links", err)
		}
		for i := range p.Links {
			if d, _ := SplitKey(p.Links[i].ID); d == domain {
				n++
			}
		}
		if p.Next == "" {
			return n, nil
		}
		next = p.Next
	}
}
