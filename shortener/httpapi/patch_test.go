package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

func TestDecodePatch(t *testing.T) {
	never, unlimited, def := time.Time{}, int64(0), shortener.ForwardDefault
	on, off := shortener.ForwardOn, shortener.ForwardOff
	url, tags, none := "https://e.example/", []string{"b", "a"}, []string{}
	exp := time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)
	max := int64(5)
	for _, tt := range []struct {
		body string
		want shortener.LinkUpdate
		code string // "" ok; "json": a JSON problem; else the domain code
	}{
		{`{}`, shortener.LinkUpdate{}, ""},
		{`{"url":"https://e.example/"}`, shortener.LinkUpdate{URL: &url}, ""},
		{`{"expires_at":"2099-01-02T03:04:05Z","max_visits":5}`, shortener.LinkUpdate{ExpiresAt: &exp, MaxVisits: &max}, ""},
		{`{"expires_at":null,"max_visits":null,"tags":null,"forward_query":null}`, shortener.LinkUpdate{ExpiresAt: &never, MaxVisits: &unlimited, Tags: &none, ForwardQuery: &def}, ""},
		{`{"tags":["b","a"],"forward_query":true}`, shortener.LinkUpdate{Tags: &tags, ForwardQuery: &on}, ""},
		{`{"tags":[],"forward_query":false}`, shortener.LinkUpdate{Tags: &none, ForwardQuery: &off}, ""},
		{`{"url":null}`, shortener.LinkUpdate{}, string(shortener.InvalidURL)},
		{`{"max_visits":0}`, shortener.LinkUpdate{}, string(shortener.InvalidParameter)},
		{`{"max_visits":-1}`, shortener.LinkUpdate{}, string(shortener.InvalidParameter)},
		{`{"expires_at":"0001-01-01T00:00:00Z"}`, shortener.LinkUpdate{}, string(shortener.InvalidParameter)},
		{`{"expires_at":"tomorrow"}`, shortener.LinkUpdate{}, string(shortener.InvalidParameter)},
		{`{"slug":"new-id"}`, shortener.LinkUpdate{}, "json"}, // ids are not edited
		{`{"visits":0}`, shortener.LinkUpdate{}, "json"},
		{`{"tags":"a"}`, shortener.LinkUpdate{}, "json"},
		{`{"forward_query":1}`, shortener.LinkUpdate{}, "json"},
		{`{"url":"https://e.example/"} {}`, shortener.LinkUpdate{}, "json"},
		{`[]`, shortener.LinkUpdate{}, "json"},
		{``, shortener.LinkUpdate{}, "json"},
		{"{\"url\":\"https://e.example/\xff\"}", shortener.LinkUpdate{}, "json"},
	} {
		got, err := decodePatch([]byte(tt.body))
		var code string
		switch c := shortener.ErrorCode(err); {
		case err == nil:
		case c == shortener.Internal:
			code = "json"
		default:
			code = string(c)
		}
		if code != tt.code {
			t.Errorf("decodePatch(%s): error %v (%q), want %q", tt.body, err, code, tt.code)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("decodePatch(%s) = %+v, want %+v", tt.body, got, tt.want)
		}
	}
}

// patchJSON encodes an update as the merge patch that means it.
func patchJSON(u shortener.LinkUpdate) []byte {
	m := map[string]any{}
	if u.URL != nil {
		m["url"] = *u.URL
	}
	if u.ExpiresAt != nil {
		m["expires_at"] = nil
		if !u.ExpiresAt.IsZero() {
			m["expires_at"] = u.ExpiresAt.Format(time.RFC3339)
		}
	}
	if u.MaxVisits != nil {
		m["max_visits"] = nil
		if *u.MaxVisits != 0 {
			m["max_visits"] = *u.MaxVisits
		}
	}
	if u.Tags != nil {
		m["tags"] = *u.Tags
	}
	if u.ForwardQuery != nil {
		m["forward_query"] = nil
		if *u.ForwardQuery != shortener.ForwardDefault {
			m["forward_query"] = *u.ForwardQuery == shortener.ForwardOn
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// The PATCH body parser: never panics, refuses what is not one JSON
// object, and what it accepts means the same once encoded again.
func FuzzDecodePatch(f *testing.F) {
	for _, s := range []string{`{}`, `{"url":"https://e.example/","tags":["a"],"forward_query":true}`, `{"expires_at":null,"max_visits":null}`,
		`{"expires_at":"2099-01-02T03:04:05Z","max_visits":7}`, `{"tags":null,"forward_query":null}`, `{"url":null}`, `{"x":1}`, `[]`, `null`,
		`{"tags":["a","a"]}`, `{"url":"\ud800"}`, `{"max_visits":1e3}`, `{"expires_at":"2099-01-02T03:04:05+02:00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		u, err := decodePatch(body)
		if err != nil {
			if shortener.ErrorMessage(err) == "" {
				t.Fatalf("decodePatch(%q): error without a message", body)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("decodePatch(%q) accepted invalid JSON", body)
		}
		again, err := decodePatch(patchJSON(u))
		if err != nil {
			t.Fatalf("decodePatch(%q) = %+v, whose encoding %s fails: %v", body, u, patchJSON(u), err)
		}
		if !reflect.DeepEqual(normal(again), normal(u)) {
			t.Fatalf("decodePatch(%q) = %+v, but its encoding %s decodes to %+v", body, u, patchJSON(u), again)
		}
	})
}

// normal makes times comparable with DeepEqual.
func normal(u shortener.LinkUpdate) shortener.LinkUpdate {
	if u.ExpiresAt != nil {
		t := time.Unix(u.ExpiresAt.Unix(), 0).UTC()
		if u.ExpiresAt.IsZero() {
			t = time.Time{}
		}
		u.ExpiresAt = &t
	}
	return u
}
