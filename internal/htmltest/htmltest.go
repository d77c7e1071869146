// Package htmltest checks that a page written without html/template
// renders hostile values as data: it parses the page as a browser's
// tokenizer does and fails on markup the values could have injected.
package htmltest

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// Hostile returns values that break out of an HTML context (element text,
// a quoted attribute value, a title, a URL attribute) unless escaped,
// each naming field so that a test can tell which one leaked.
func Hostile(field string) []string {
	return []string{
		`"><script>alert("` + field + `")</script>`,
		`'><img src=x onerror=alert('` + field + `')>`,
		`</title></textarea></option><script>/*` + field + `*/</script>`,
		`javascript:alert('` + field + `')`,
		` JavaScript:alert('` + field + `') &amp; <!-- -->`,
	}
}

// Check parses page and fails t when it holds a script element other than
// an external one whose src is among trusted (with no inline text), an
// event handler attribute (on…), or a URL attribute (href, src, action,
// formaction) whose scheme is not http, https or mailto, unless the URL is
// among trusted (the page's own, such as an icon's "data:,"). Each of
// values must appear whole in one text node or attribute value, as a
// browser decodes it: shown, not interpreted.
func Check(t testing.TB, page string, values []string, trusted ...string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(page))
	var data []string // every text node and attribute value, decoded
	inScript := false
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		switch tt {
		case html.TextToken:
			if inScript && strings.TrimSpace(tok.Data) != "" {
				t.Errorf("inline script %q", tok.Data)
			}
			data = append(data, tok.Data)
		case html.StartTagToken, html.SelfClosingTagToken:
			inScript = tok.Data == "script" && tt == html.StartTagToken
			if tok.Data == "script" && !scriptAllowed(tok, trusted) {
				t.Errorf("script element %s", tok.String())
			}
			for _, a := range tok.Attr {
				data = append(data, a.Val)
				if strings.HasPrefix(a.Key, "on") {
					t.Errorf("event handler attribute %s on <%s>", a.Key, tok.Data)
				}
				if urlAttr[a.Key] && !SafeScheme(a.Val) && !slices.Contains(trusted, a.Val) {
					t.Errorf("<%s %s=%q>: a URL of an unsafe scheme", tok.Data, a.Key, a.Val)
				}
			}
		case html.EndTagToken:
			inScript = false
		}
	}
	for _, v := range values {
		found := false
		for _, d := range data {
			found = found || strings.Contains(d, v)
		}
		if !found {
			t.Errorf("%q does not appear whole in any text or attribute value: not escaped, or dropped", v)
		}
	}
}

var urlAttr = map[string]bool{"href": true, "src": true, "action": true, "formaction": true}

func scriptAllowed(tok html.Token, trusted []string) bool {
	for _, a := range tok.Attr {
		if a.Key == "src" && slices.Contains(trusted, a.Val) {
			return true
		}
	}
	return false
}

// SafeScheme reports whether a URL, as a browser reads it (leading and
// trailing spaces and control characters removed, tabs and newlines
// dropped), is relative or of the http, https or mailto scheme.
func SafeScheme(u string) bool {
	u = strings.TrimFunc(u, func(r rune) bool { return r <= ' ' })
	u = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, u)
	scheme, _, ok := strings.Cut(u, ":")
	if !ok || strings.ContainsAny(scheme, "/?#") {
		return true // no scheme: relative
	}
	switch strings.ToLower(scheme) {
	case "http", "https", "mailto":
		return true
	}
	return false
}
