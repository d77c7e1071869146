package httpapi

import (
	"net/url"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/htmltest"
)

// Every field the page shows is written as data, whatever it holds: each
// row sets one field to values that break out of element text, a quoted
// attribute, a <title>/<option>, or a URL attribute, and the page parsed
// as a browser would has no script or event handler of theirs, no unsafe
// URL, and shows the value whole. Red with esc or safeURL made the
// identity (tried: script elements, onerror, javascript: hrefs).
func TestPageEscapes(t *testing.T) {
	u := newUI()
	type form = struct{ URL, Slug, Expires, MaxVisits, Domain string }
	tests := []struct {
		field string
		set   func(d *pageData, v string)
		shown func(v string) string // what the page must show whole; "" nothing
	}{
		{"form url", func(d *pageData, v string) { d.Form = form{URL: v} }, nil},
		{"form slug", func(d *pageData, v string) { d.Form = form{Slug: v} }, nil},
		{"form max visits", func(d *pageData, v string) { d.Form = form{MaxVisits: v} }, nil},
		{"form domain", func(d *pageData, v string) { d.Domains, d.Form = []string{"a.example", v}, form{Domain: v} }, nil},
		{"domains", func(d *pageData, v string) { d.Domains = []string{v} }, nil},
		{"expiry", func(d *pageData, v string) {
			d.Expiries = []struct{ Value, Label string }{{v, v}}
			d.Form = form{Expires: v}
		}, nil},
		{"error", func(d *pageData, v string) { d.Error = v }, nil},
		{"csrf", func(d *pageData, v string) { d.CSRF = v }, nil},
		{"session name", func(d *pageData, v string) { d.Session = &pageSession{Name: v} }, func(v string) string { return "Signed in: " + v }},
		{"short url", func(d *pageData, v string) { d.Result = &linkJSON{ID: "a", ShortURL: v, URL: "https://example.com/"} }, nil},
		{"target url", func(d *pageData, v string) { d.Result = &linkJSON{ID: "a", ShortURL: "http://s/a", URL: v} }, nil},
		{"id", func(d *pageData, v string) {
			d.Result = &linkJSON{ID: v, ShortURL: "http://s/a", URL: "https://example.com/"}
		},
			func(v string) string { return "/api/v1/links/" + url.PathEscape(v) + "/qr" }},
		{"css", func(d *pageData, v string) { d.CSS = v }, urlOnly},
		{"js", func(d *pageData, v string) { d.JS = v }, urlOnly},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			for _, v := range htmltest.Hostile(tt.field) {
				d := pageData{JS: u.js, CSS: u.css, Expiries: uiExpiries, QRSize: DefaultQRSize}
				tt.set(&d, v)
				var shown []string
				if tt.shown == nil {
					shown = []string{v}
				} else if s := tt.shown(v); s != "" {
					shown = []string{s}
				}
				page := string(render(u.page, &d))
				// Trusted: the icon's data:, and the script named, unless its
				// scheme is unsafe (then it must have become "#ZgotmplZ").
				htmltest.Check(t, page, shown, "data:,", urlOnly(d.JS), "#ZgotmplZ")
				if tt.field == "form domain" || tt.field == "expiry" {
					if !strings.Contains(page, `value="`+esc(v)+`" selected>`) {
						t.Errorf("%q is not the selected option", v)
					}
				}
			}
		})
	}
}

// urlOnly: a value shown only as a URL (a script or style sheet) is shown
// when its scheme is safe.
func urlOnly(v string) string {
	if htmltest.SafeScheme(v) {
		return v
	}
	return ""
}

func TestSafeURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/static/app.js", "/static/app.js"},
		{"http://s.example/abc", "http://s.example/abc"},
		{"HTTPS://s.example/", "HTTPS://s.example/"},
		{"mailto:a@example.com", "mailto:a@example.com"},
		{"a/b:c", "a/b:c"},
		{"?q=x:y", "?q=x:y"},
		{"javascript:alert(1)", "#ZgotmplZ"},
		{" JavaScript:alert(1)", "#ZgotmplZ"},
		{"java\tscript:alert(1)", "#ZgotmplZ"},
		{"\x01javascript:alert(1)", "#ZgotmplZ"},
		{"data:text/html,<script>", "#ZgotmplZ"},
		{"vbscript:x", "#ZgotmplZ"},
	}
	for _, tt := range tests {
		if got := safeURL(tt.in); got != tt.want {
			t.Errorf("safeURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if htmltest.SafeScheme(tt.in) != (tt.want != "#ZgotmplZ") {
			t.Errorf("htmltest.SafeScheme(%q) disagrees", tt.in)
		}
	}
}

// The page's slots stand where their kind is safe, and every slot is
// used; a slot put where its escaping would not hold stops the page from
// parsing.
func TestPageSlots(t *testing.T) {
	src, err := uiFiles.ReadFile("ui/index.html")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parsePage(string(src), pageSlots); err != nil {
		t.Fatalf("ui/index.html: %v", err)
	}
	for name := range pageSlots {
		if !strings.Contains(string(src), "{{"+name+"}}") {
			t.Errorf("slot {{%s}} is not on the page", name)
		}
	}
	slots := map[string]slot{
		"t": {text: func(*pageData) string { return "" }},
		"u": {url: func(*pageData) string { return "" }},
		"a": {attr: "hidden", on: func(*pageData) bool { return true }},
		"m": {markup: func(*strings.Builder, *pageData) {}},
	}
	tests := []struct {
		src string
		ok  bool
	}{
		{`<p>{{t}}</p>`, true},
		{`<input value="{{t}}">`, true},
		{`<input value='x {{t}}'>`, true},
		{`<title>{{t}}</title>`, true},
		{`<a href="{{u}}">`, true},
		{`<a id="x" href="{{u}}" class="c">{{t}}</a>`, true},
		{`<p class="x"{{a}}>`, true},
		{`<div>{{m}}</div>`, true},
		{`<script src="/a.js"></script><p>{{t}}</p>`, true},
		{`<!-- a comment --><p>{{t}}</p>`, true},
		{`<a href="{{t}}">`, false},    // text in a URL
		{`<a href="/x/{{u}}">`, false}, // a URL not the whole value
		{`<p>{{u}}</p>`, false},        // a URL in text
		{`<input value={{t}}>`, false}, // unquoted
		{`<p onclick="{{t}}">`, false}, // an event handler
		{`<p style="{{t}}">`, false},   // style
		{`<script>var x = "{{t}}"</script>`, false},
		{`<style>p{color:{{t}}}</style>`, false},
		{`<!-- {{t}} -->`, false},
		{`<p {{t}}>`, false},         // text among attributes
		{`<p class="{{a}}">`, false}, // an attribute in a value
		{`<p>{{a}}</p>`, false},      // an attribute in text
		{`<p class="{{m}}">`, false}, // markup in a value
		{`<p>{{nope}}</p>`, false},   // no such slot
		{`<p>{{t}</p>`, false},       // unclosed
		{`<p class="x`, false},       // ends in a value
	}
	for _, tt := range tests {
		_, err := parsePage(tt.src, slots)
		if (err == nil) != tt.ok {
			t.Errorf("parsePage(%q): %v, want ok %v", tt.src, err, tt.ok)
		}
	}
}
