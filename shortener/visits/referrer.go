package visits

// MaxHostLength bounds a referrer host; longer ones count as invalid.
const MaxHostLength = 100

// InvalidReferrer is the key of Referer headers that carry no usable host.
const InvalidReferrer = "(invalid)"

// ReferrerHost returns the host of a Referer header value, lowercased into
// buf (at least MaxHostLength bytes), without port or user info: the key
// visits are counted under. An empty header gives "" (a direct visit);
// something that is not an absolute URL with a host, or a host longer than
// MaxHostLength, gives nil. It does not allocate.
func ReferrerHost(ref, buf []byte) []byte {
	if len(ref) == 0 {
		return buf[:0]
	}
	// scheme ":" "//"
	i := 0
	for i < len(ref) && isSchemeChar(ref[i], i == 0) {
		i++
	}
	if i == 0 || i+2 >= len(ref) || ref[i] != ':' || ref[i+1] != '/' || ref[i+2] != '/' {
		return nil
	}
	rest := ref[i+3:]
	end := len(rest)
	for j, c := range rest {
		if c == '/' || c == '?' || c == '#' {
			end = j
			break
		}
	}
	auth := rest[:end]
	for j := len(auth) - 1; j >= 0; j-- {
		if auth[j] == '@' {
			auth = auth[j+1:]
			break
		}
	}
	// Strip the port, keeping IPv6 literals in brackets whole.
	if len(auth) > 0 && auth[0] == '[' {
		k := 0
		for k < len(auth) && auth[k] != ']' {
			k++
		}
		if k == len(auth) {
			return nil
		}
		auth = auth[:k+1]
	} else {
		for j := len(auth) - 1; j >= 0; j-- {
			if auth[j] == ':' {
				auth = auth[:j]
				break
			}
		}
	}
	if len(auth) == 0 || len(auth) > MaxHostLength || len(buf) < len(auth) {
		return nil
	}
	out := buf[:len(auth)]
	for j, c := range auth {
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '.', c == '-', c == '_', c == '[', c == ']', c == ':', c == '%':
		default:
			return nil // not a host name (spaces, quotes, control or non-ASCII bytes)
		}
		out[j] = c
	}
	return out
}

func isSchemeChar(c byte, first bool) bool {
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
		return true
	}
	return !first && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')
}
