package certkey_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/linkgate/linkgate/internal/certkey"
)

func TestList(t *testing.T) {
	files := []string{"a/b/c", "a/b/d", "a/e", "ab/f", "a", "x/y"}
	tests := []struct {
		dir       string
		recursive bool
		want      []string
	}{
		{"a", false, []string{"a/b", "a/e"}},
		{"a", true, []string{"a/b", "a/b/c", "a/b/d", "a/e"}},
		{"a/b", false, []string{"a/b/c", "a/b/d"}},
		{"ab", true, []string{"ab/f"}},
		{"a/e", false, []string{}},
		{"", false, []string{"a", "ab", "x"}},
		{"", true, []string{"a", "a/b", "a/b/c", "a/b/d", "a/e", "ab", "ab/f", "x", "x/y"}},
		{"nope", true, []string{}},
	}
	for _, tt := range tests {
		if got := certkey.List(tt.dir, files, tt.recursive); !slices.Equal(got, tt.want) {
			t.Errorf("List(%q, recursive %v) = %q, want %q", tt.dir, tt.recursive, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"certificates/acme/example.com/example.com.crt", true},
		{"a", true},
		{"", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
	}
	for _, tt := range tests {
		err := certkey.Check(tt.key)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, certkey.ErrInvalid)) {
			t.Errorf("Check(%q) = %v, want ok %v", tt.key, err, tt.ok)
		}
	}
}

func TestUnder(t *testing.T) {
	tests := []struct {
		key, dir string
		want     bool
	}{
		{"a/b", "a", true},
		{"ab/c", "a", false},
		{"a", "a", false},
		{"a", "", true},
		{"a/b/c", "a/b", true},
	}
	for _, tt := range tests {
		if got := certkey.Under(tt.key, tt.dir); got != tt.want {
			t.Errorf("Under(%q, %q) = %v", tt.key, tt.dir, got)
		}
	}
}
