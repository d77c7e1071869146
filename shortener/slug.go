package shortener

import "strings"

// Slug length bounds for custom ids.
const (
	MinSlugLength = 3
	MaxSlugLength = MaxIDLength
)

// reserved are paths the service (or a later part of it) answers itself, and
// names that would confuse people. Compared case-insensitively.
var reserved = map[string]bool{
	"api": true, "healthz": true, "readyz": true, "livez": true, "metrics": true,
	"shortenurl": true, "getfullurl": true, "static": true, "assets": true,
	"favicon.ico": true, "robots.txt": true, "openapi.yaml": true, "openapi.json": true,
	"admin": true, "login": true, "logout": true, "ui": true, "docs": true,
	"debug": true, "stats": true, "qr": true, "new": true, "index": true,
	".well-known": true, "sitemap.xml": true,
}

// ValidateSlug checks a custom id: MinSlugLength to MaxSlugLength characters
// of [A-Za-z0-9_-], not a reserved word. The error has Code InvalidSlug.
func ValidateSlug(slug string) error {
	if len(slug) < MinSlugLength || len(slug) > MaxSlugLength {
		return Errorf(InvalidSlug, "slug must be %d to %d characters long", MinSlugLength, MaxSlugLength)
	}
	if !ValidID(slug) {
		return Errorf(InvalidSlug, "slug may contain only letters, digits, '_' and '-'")
	}
	if reserved[strings.ToLower(slug)] {
		return Errorf(InvalidSlug, "slug %q is reserved", slug)
	}
	return nil
}
