package shortener

// IDLength is the length of generated ids, as in the seed's service.
const IDLength = 10

// MaxIDLength bounds any id a store is asked about: generated ids and custom
// slugs are never longer, so longer paths are answered 404 without a lookup.
const MaxIDLength = 64

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns a random id of IDLength base62 characters (about 59.5 bits)
// read from crypto/rand. Bytes ≥ 248 are rejected so each character is
// uniform. The alphabet is a subset of the seed's [A-Za-z0-9_-], so seed
// clients keep working.
func NewID() (string, error) { return randomBase62(IDLength) }

// ValidID reports whether id could name a link: 1 to MaxIDLength characters
// of [A-Za-z0-9_-]. Anything else is answered 404 without asking the store.
func ValidID[T string | []byte](id T) bool {
	if len(id) == 0 || len(id) > MaxIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !idChar(id[i]) {
			return false
		}
	}
	return true
}

func idChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
