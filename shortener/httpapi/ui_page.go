package httpapi

import (
	"fmt"
	"html"
	"net/url"
	"strconv"
	"strings"
)

// The page is ui/index.html with slots, {{name}}, that Go fills from
// pageData when it is served. It is not html/template: that package's
// executor calls reflect.Value.MethodByName, which makes the linker keep
// every exported method of every reachable type (issue 32: megabytes).
// What html/template gave, escaping by context, is kept this way:
//
//   - each slot has a kind, and parsePage checks, scanning the HTML before
//     it, that the slot stands where that kind is safe: text in element
//     text or in a quoted attribute value (not an event handler, style or
//     URL attribute), a URL alone in a quoted href/src value, an attribute
//     between a tag's attributes, markup in element text; never in a script
//     or style element, a comment or an unquoted value. A page that breaks
//     this does not start (newUI panics; TestPageSlots).
//   - every value is written through html.EscapeString, and every URL
//     through safeURL first (relative, http, https or mailto; anything else
//     becomes "#ZgotmplZ", as html/template writes it).
type slot struct {
	text  func(d *pageData) string // element text or an attribute value
	url   func(d *pageData) string // a whole href or src value
	attr  string                   // an attribute, written when on says so
	on    func(d *pageData) bool
	value func(d *pageData) string // the attribute's value; none: a boolean attribute
	// markup writes elements, its values through esc and safeURL.
	markup func(b *strings.Builder, d *pageData)
}

// pagePart is static HTML followed by a slot (none after the last part).
type pagePart struct {
	static string
	slot   *slot
}

// esc is the escaping of every value the page shows.
var esc = html.EscapeString

// safeURL returns u when it is relative or of the http, https or mailto
// scheme, as a browser reads it, and "#ZgotmplZ" otherwise (javascript:,
// data:, vbscript: …).
func safeURL(u string) string {
	trimmed := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1 // browsers drop these anywhere in a URL
		}
		return r
	}, strings.TrimFunc(u, func(r rune) bool { return r <= ' ' }))
	scheme, _, ok := strings.Cut(trimmed, ":")
	if !ok || strings.ContainsAny(scheme, "/?#") {
		return u
	}
	switch strings.ToLower(scheme) {
	case "http", "https", "mailto":
		return u
	}
	return "#ZgotmplZ"
}

// pageSlots are the slots ui/index.html may name.
var pageSlots = map[string]slot{
	"css":          {url: func(d *pageData) string { return d.CSS }},
	"js":           {url: func(d *pageData) string { return d.JS }},
	"stats-public": {text: func(d *pageData) string { return strconv.FormatBool(d.StatsPublic) }},
	"qr-size":      {text: func(d *pageData) string { return strconv.Itoa(d.QRSize) }},
	"data-pending": {attr: "data-pending", on: func(d *pageData) bool { return d.CSRF != "" }},
	// The header is drawn as the script will leave it: the sections the
	// session may use, who is signed in.
	"hidden-signed-in":  {attr: "hidden", on: func(d *pageData) bool { return d.Session != nil }},
	"hidden-signed-out": {attr: "hidden", on: func(d *pageData) bool { return d.Session == nil }},
	"hidden-no-make":    {attr: "hidden", on: func(d *pageData) bool { return d.Session != nil && !d.Session.Make }},
	"hidden-no-links":   {attr: "hidden", on: func(d *pageData) bool { return d.Session != nil && !d.Session.Links }},
	"hidden-no-stats":   {attr: "hidden", on: func(d *pageData) bool { return d.Session != nil && !d.Session.Stats }},
	"hidden-no-keys":    {attr: "hidden", on: func(d *pageData) bool { return d.Session != nil && !d.Session.AdminKeys }},
	"who": {text: func(d *pageData) string {
		if d.Session == nil {
			return ""
		}
		return "Signed in: " + d.Session.Name
	}},
	// The form, as entered (after an error) and its choices.
	"csrf-input": {markup: func(b *strings.Builder, d *pageData) {
		if d.CSRF != "" {
			b.WriteString(`<input type="hidden" name="csrf_token" value="` + esc(d.CSRF) + `">`)
		}
	}},
	"form-url":        {text: func(d *pageData) string { return d.Form.URL }},
	"form-slug":       {text: func(d *pageData) string { return d.Form.Slug }},
	"form-max-visits": {text: func(d *pageData) string { return d.Form.MaxVisits }},
	"form-domain": {markup: func(b *strings.Builder, d *pageData) {
		domainField(b, d, `<div class="field">
      <label for="domain">Domain</label>
      <select id="domain" name="domain">
        `, "\n      </select>\n    </div>", d.Form.Domain)
	}},
	"expiry-options": {markup: func(b *strings.Builder, d *pageData) {
		for _, e := range d.Expiries {
			option(b, e.Value, e.Label, e.Value == d.Form.Expires)
		}
	}},
	"error": {text: func(d *pageData) string { return d.Error }},
	// The result of the no-JavaScript form.
	"hidden-no-result": {attr: "hidden", on: func(d *pageData) bool { return d.Result == nil }},
	"short-url":        {text: resultShortURL},
	"short-url-href":   {url: resultShortURL},
	"target-url": {text: func(d *pageData) string {
		if d.Result == nil {
			return ""
		}
		return d.Result.URL
	}},
	"qr-src": {attr: "src", on: func(d *pageData) bool { return d.Result != nil }, value: func(d *pageData) string {
		return "/api/v1/links/" + url.PathEscape(d.Result.ID) + "/qr?format=svg&size=" + strconv.Itoa(d.QRSize)
	}},
	// The domain filters of the links and the analytics.
	"links-domain": {markup: func(b *strings.Builder, d *pageData) {
		domainField(b, d, `<div class="field"><label for="f-domain">Domain</label><select id="f-domain"><option value="">All</option>`,
			"</select></div>", "")
	}},
	"stats-domain": {markup: func(b *strings.Builder, d *pageData) {
		domainField(b, d, `<div class="field" data-all><label for="s-domain">Domain</label><select id="s-domain"><option value="">All</option>`,
			"</select></div>", "")
	}},
}

func resultShortURL(d *pageData) string {
	if d.Result == nil {
		return ""
	}
	return d.Result.ShortURL
}

// domainField writes open, an option per domain, and end, when there are
// domains to choose from.
func domainField(b *strings.Builder, d *pageData, open, end, selected string) {
	if len(d.Domains) == 0 {
		return
	}
	b.WriteString(open)
	for _, dom := range d.Domains {
		option(b, dom, dom, dom == selected && selected != "")
	}
	b.WriteString(end)
}

func option(b *strings.Builder, value, label string, selected bool) {
	b.WriteString(`<option value="` + esc(value) + `"`)
	if selected {
		b.WriteString(" selected")
	}
	b.WriteString(">" + esc(label) + "</option>")
}

// render writes the page for d.
func render(parts []pagePart, d *pageData) []byte {
	var b strings.Builder
	b.Grow(16 << 10)
	for _, p := range parts {
		b.WriteString(p.static)
		switch s := p.slot; {
		case s == nil:
		case s.text != nil:
			b.WriteString(esc(s.text(d)))
		case s.url != nil:
			b.WriteString(esc(safeURL(s.url(d))))
		case s.attr != "":
			if !s.on(d) {
				break
			}
			b.WriteString(" " + s.attr)
			if s.value != nil {
				v := s.value(d)
				if urlAttrs[s.attr] {
					v = safeURL(v)
				}
				b.WriteString(`="` + esc(v) + `"`)
			}
		default:
			s.markup(&b, d)
		}
	}
	return []byte(b.String())
}

// urlAttrs are the attributes whose value is a URL.
var urlAttrs = map[string]bool{"href": true, "src": true, "action": true, "formaction": true, "poster": true, "cite": true, "data": true}

// parsePage splits src at its slots and checks each stands where its kind
// is safe (see slot).
func parsePage(src string, slots map[string]slot) ([]pagePart, error) {
	var parts []pagePart
	var c htmlContext
	for {
		i := strings.Index(src, "{{")
		if i < 0 {
			if err := c.scan(src); err != nil {
				return nil, err
			}
			if c.state != inText || c.raw != "" {
				return nil, fmt.Errorf("the page ends inside a tag, value, comment or %s element", c.raw)
			}
			return append(parts, pagePart{static: src}), nil
		}
		j := strings.Index(src[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("unclosed slot at %q", src[i:min(len(src), i+20)])
		}
		name := src[i+2 : i+j]
		s, ok := slots[name]
		if !ok {
			return nil, fmt.Errorf("no slot {{%s}}", name)
		}
		if err := c.scan(src[:i]); err != nil {
			return nil, err
		}
		if err := c.allows(&s); err != nil {
			return nil, fmt.Errorf("{{%s}}: %w", name, err)
		}
		parts = append(parts, pagePart{static: src[:i], slot: &s})
		src = src[i+j+2:]
	}
}

// htmlContext is where a scan of HTML stands: in text, in a tag, or in a
// tag's attribute value.
type htmlContext struct {
	state  int
	tag    string // the tag being read
	attr   string // the attribute being read, or whose value
	quote  byte   // the value's quote; 0: unquoted
	value  int    // bytes of the value read so far
	raw    string // in the text of a script or style element
	inComm bool   // in a comment
}

const (
	inText = iota
	inTag
	inValue
)

// scan advances c over s.
func (c *htmlContext) scan(s string) error {
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case c.inComm:
			if strings.HasPrefix(s[i:], "-->") {
				c.inComm, i = false, i+2
			}
		case c.state == inText && c.raw != "":
			if len(s) >= i+2+len(c.raw) && strings.EqualFold(s[i:i+2+len(c.raw)], "</"+c.raw) {
				c.raw, c.state, c.tag, i = "", inTag, "/", i+1+len(c.raw)
			}
		case c.state == inText:
			switch {
			case strings.HasPrefix(s[i:], "<!--"):
				c.inComm, i = true, i+3
			case ch == '<' && i+1 < len(s) && (isLetter(s[i+1]) || s[i+1] == '/' || s[i+1] == '!'):
				c.state, c.tag, c.attr = inTag, "", ""
				for i+1 < len(s) && s[i+1] != ' ' && s[i+1] != '>' && s[i+1] != '\n' {
					i++
					c.tag += string(s[i])
				}
				c.tag = strings.ToLower(c.tag)
			}
		case c.state == inTag:
			switch {
			case ch == '>':
				c.state = inText
				if c.tag == "script" || c.tag == "style" {
					c.raw = c.tag
				}
			case ch == '=':
				c.state, c.value, c.quote = inValue, 0, 0
				if i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\'') {
					c.quote, i = s[i+1], i+1
				}
			case ch == ' ' || ch == '\n' || ch == '\t' || ch == '/':
				c.attr = ""
			default:
				c.attr += string(ch | 0x20)
			}
		case c.state == inValue:
			switch {
			case c.quote != 0 && ch == c.quote, c.quote == 0 && (ch == ' ' || ch == '\n' || ch == '>'):
				c.state, c.attr = inTag, ""
				if ch == '>' {
					c.state = inText
				}
			default:
				c.value++
			}
		}
	}
	return nil
}

// allows reports whether a slot of s's kind may stand where c is.
func (c *htmlContext) allows(s *slot) error {
	switch {
	case c.inComm:
		return fmt.Errorf("in a comment")
	case c.raw != "":
		return fmt.Errorf("in a %s element", c.raw)
	case c.state == inValue && c.quote == 0:
		return fmt.Errorf("in the unquoted value of %s", c.attr)
	case s.text != nil:
		if c.state == inText {
			return nil
		}
		if c.state == inValue && !urlAttrs[c.attr] && !strings.HasPrefix(c.attr, "on") && c.attr != "style" && c.attr != "srcset" {
			return nil
		}
		return fmt.Errorf("text in <%s>, state %d, attribute %q", c.tag, c.state, c.attr)
	case s.url != nil:
		if c.state == inValue && urlAttrs[c.attr] && c.value == 0 {
			return nil
		}
		return fmt.Errorf("a URL must be the whole value of an href or src attribute (in <%s>, state %d, attribute %q)", c.tag, c.state, c.attr)
	case s.attr != "":
		if c.state == inTag && c.attr == "" {
			return nil
		}
		return fmt.Errorf("an attribute outside a tag's attribute list (in <%s>, state %d)", c.tag, c.state)
	case s.markup != nil:
		if c.state == inText {
			return nil
		}
		return fmt.Errorf("markup inside <%s>", c.tag)
	}
	return fmt.Errorf("a slot of no kind")
}

func isLetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }
