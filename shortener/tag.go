package shortener

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// Tag bounds: a link has at most MaxTags tags of 1 to MaxTagLength bytes.
const (
	MaxTags      = 16
	MaxTagLength = 64
)

// ValidateTags checks a link's tags and returns them in their stored
// form: sorted, each once. A tag is 1 to MaxTagLength bytes of letters,
// digits (any script), and '-', '_', '.', ':', '/', '+', '@'; tags are
// compared exactly (case matters). The error has Code InvalidParameter.
// No tags is nil.
func ValidateTags(tags []string) ([]string, error) {
	if len(tags) > MaxTags {
		return nil, Errorf(InvalidParameter, "a link has at most %d tags, got %d", MaxTags, len(tags))
	}
	for _, t := range tags {
		if err := validateTag(t); err != nil {
			return nil, err
		}
	}
	if len(tags) == 0 {
		return nil, nil
	}
	return slices.Compact(slices.Sorted(slices.Values(tags))), nil
}

func validateTag(t string) error {
	if len(t) == 0 || len(t) > MaxTagLength {
		return Errorf(InvalidParameter, "a tag is 1 to %d bytes long", MaxTagLength)
	}
	if !utf8.ValidString(t) {
		return Errorf(InvalidParameter, "tag is not valid UTF-8")
	}
	for _, r := range t {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			continue
		}
		switch r {
		case '-', '_', '.', ':', '/', '+', '@':
			continue
		}
		return Errorf(InvalidParameter, "tag %q may contain only letters, digits and - _ . : / + @", t)
	}
	return nil
}
