package shortener

// Domains (issue 13 §4): a server may answer for several short-link
// domains (sho.rt, go.example.com), a link belongs to one of them, and
// the same id may exist on two. Link.Domain names it; "" is the default
// domain, the one every link had before domains existed, so a store
// written before needs no migration.
//
// A store keeps a link under its key (LinkKey): the bare id on the
// default domain, which is the seed's table layout (DynamoDB's shortURL
// is the id, so the seed's app still reads those links), and
// domain "/" id on any other ('/' is neither an id nor a domain
// character, so keys never collide). Visits, statistics and caches are
// keyed the same way. Stores know only keys: they keep the key in
// Link.ID and never set Link.Domain; the Service maps between the two.

// MaxDomainLength bounds a domain name in a key (host name and port).
// Short-link domains are short; this keeps every key within
// MaxKeyLength, which the visit recorder and the stores' buffers take.
const MaxDomainLength = 128

// MaxKeyLength bounds a store key: a domain, '/', an id.
const MaxKeyLength = MaxDomainLength + 1 + MaxIDLength

// keySep separates a non-default domain from the id in a key.
const keySep = '/'

// ValidDomain reports whether d can be a non-default domain in a key: 1
// to MaxDomainLength characters of [a-z0-9.:-], the form a configured
// domain takes (a canonical host name, A-labels in lower case, with an
// optional port). It says nothing of whether the server answers for it.
func ValidDomain[T string | []byte](d T) bool {
	if len(d) == 0 || len(d) > MaxDomainLength {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == ':') {
			return false
		}
	}
	return true
}

// LinkKey returns the key of the link id on domain ("": the default
// domain).
func LinkKey(domain, id string) string {
	if domain == "" {
		return id
	}
	return domain + string(keySep) + id
}

// AppendKey appends the key of the link id on domain to dst, for the
// redirect path, which builds it in a buffer of its own.
func AppendKey(dst []byte, domain string, id []byte) []byte {
	if domain != "" {
		dst = append(dst, domain...)
		dst = append(dst, keySep)
	}
	return append(dst, id...)
}

// SplitKey returns the domain ("": the default) and the id of a key.
func SplitKey[T string | []byte](key T) (domain, id T) {
	i := lastSep(key)
	if i < 0 {
		return key[:0], key
	}
	return key[:i], key[i+1:]
}

// lastSep is the index of the last keySep in key, or -1.
func lastSep[T string | []byte](key T) int {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == keySep {
			return i
		}
	}
	return -1
}

// ValidKey reports whether key could name a link: a ValidID, after a
// ValidDomain and '/' for a link on another domain than the default.
// Anything else is answered 404 without asking the store.
func ValidKey[T string | []byte](key T) bool {
	return ValidID(key) || validDomainKey(key) // the default domain's keys in one pass, as before domains
}

// validDomainKey reports whether key is a ValidDomain, '/' and a ValidID.
func validDomainKey[T string | []byte](key T) bool {
	i := lastSep(key)
	return i >= 0 && ValidDomain(key[:i]) && ValidID(key[i+1:])
}

// Key returns the link's key (LinkKey).
func (l *Link) Key() string { return LinkKey(l.Domain, l.ID) }

// fromStore maps a link as a store returns it (the key in ID) to the
// domain's view: Domain and ID.
func fromStore(l Link) Link {
	l.Domain, l.ID = SplitKey(l.ID)
	return l
}

// toStore maps a link to the store's view: its key in ID, no Domain.
func toStore(l Link) Link {
	l.ID, l.Domain = l.Key(), ""
	return l
}
