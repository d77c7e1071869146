package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The reference pages stay true to the tree: every help block any page
// shows is what the command prints now, and every repository path a page
// names (or links to) exists.

const repoRoot = "../.."

// docPages are the pages checked: README.md and docs/*.md.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(pages, filepath.Join(repoRoot, "README.md"))
}

var helpBlockRE = regexp.MustCompile("(?s)```text\n\\$ linkgate ([^\n]*)\n(.*?)```")

// Every fenced block that shows `$ linkgate help X` or `$ linkgate X [Y]
// --help`, on any page (not only inside a command page's generated part),
// is what that prints now.
func TestDocsHelpBlocks(t *testing.T) {
	n := 0
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range helpBlockRE.FindAllStringSubmatch(string(b), -1) {
			args := strings.Fields(m[1])
			switch {
			case len(args) == 2 && args[0] == "help":
				args = args[1:]
			case len(args) >= 2 && args[len(args)-1] == "--help":
				args = args[:len(args)-1]
			default:
				continue // an example run, not a help block
			}
			n++
			if got := helpText(t, args...); got != m[2] {
				t.Errorf("%s: the block of `linkgate %s` differs from what it prints now (go generate ./... rewrites the generated ones)", rel(page), m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no help block found: the pattern is stale")
	}
}

// topDirs are the repository's top-level folders, not those .gitignore
// names as build output (dist/, bin/: a doc names what a build will
// write there): a word that starts with one of them and a slash is taken
// for a path.
func topDirs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	ignore, err := os.ReadFile(filepath.Join(repoRoot, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, line := range strings.Split(string(ignore), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "/"); ok {
			ignored[strings.TrimSuffix(name, "/")] = true
		}
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !ignored[e.Name()] {
			dirs = append(dirs, regexp.QuoteMeta(e.Name()))
		}
	}
	return dirs
}

// pathsIn returns the repository paths text names: words that begin with a
// top-level folder and a slash (after a space, a quote, a backtick or a
// bracket, so URLs and API paths like /api/v1 are not taken), with a
// trailing :LINE or punctuation cut off. A glob or placeholder (*, <, {)
// ends the path at the folder before it.
func pathsIn(text string, dirs []string) []string {
	re := regexp.MustCompile("(?:^|[\\s`'\"(\\[])((?:" + strings.Join(dirs, "|") + ")/[A-Za-z0-9_./*<{-]*)")
	var out []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		p := m[1]
		if i := strings.IndexAny(p, "*<{"); i >= 0 {
			p = p[:strings.LastIndex(p[:i], "/")+1]
		}
		p = strings.TrimRight(p, ".,:;-")
		out = append(out, p)
	}
	return out
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every path a page names exists, and every relative link resolves (to a
// file, and a #fragment to one of its headings: TestDocsAnchors).
func TestDocsPathsExist(t *testing.T) {
	dirs := topDirs(t)
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, p := range pathsIn(text, dirs) {
			if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", rel(page), p)
			}
		}
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel(page), m[1])
			}
		}
	}
}

var (
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	htmlIDRE  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	fenceRE   = regexp.MustCompile("^\\s*(```|~~~)")
)

// anchors returns the fragments a Markdown page has, as GitHub makes them:
// each heading (outside code fences) lower-cased, its punctuation dropped
// except hyphens and underscores, spaces turned into hyphens, a repeated
// one suffixed -1, -2, …; and every <a id|name="…">.
func anchors(page string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if fenceRE.MatchString(line) {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// Every #fragment a page links to, on itself or on another Markdown page
// of the repository, is an anchor that page has: a heading renamed or cut
// must take its links along.
func TestDocsAnchors(t *testing.T) {
	n := 0
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			target, frag, ok := strings.Cut(m[1], "#")
			if !ok || strings.Contains(target, "://") || (target != "" && !strings.HasSuffix(target, ".md")) {
				continue
			}
			file := page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), target)
			}
			tb, err := os.ReadFile(file)
			if err != nil {
				continue // TestDocsPathsExist reports it
			}
			n++
			if !anchors(string(tb))[frag] {
				t.Errorf("%s links to %s, which has no heading #%s", rel(page), m[1], frag)
			}
		}
	}
	if n == 0 {
		t.Fatal("no link with a #fragment found: the pattern is stale")
	}
}

func TestAnchors(t *testing.T) {
	page := "# linkgate bench\n## Reference: `linkgate bench`\n```sh\n# not a heading\n```\n" +
		"### `make bench-abuse`: redirects during a flood\n## Tests\n## Tests\n## Größe & Zeit (v2)\n<a id=\"custom\"></a>\n"
	got := anchors(page)
	for _, want := range []string{"linkgate-bench", "reference-linkgate-bench", "make-bench-abuse-redirects-during-a-flood", "tests", "tests-1", "größe--zeit-v2", "custom"} {
		if !got[want] {
			t.Errorf("anchors: no %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("anchors: a comment in a code fence taken for a heading")
	}
}

func TestPathsIn(t *testing.T) {
	dirs := []string{"cmd", "docs", "gateway", "api"}
	tests := []struct {
		text string
		want []string
	}{
		{"see `cmd/linkgate/gateway.go`.", []string{"cmd/linkgate/gateway.go"}},
		{"(gateway/proxy/proxy.go:361)", []string{"gateway/proxy/proxy.go"}},
		{"gateway/proxy/h2*.go and docs/results/<target>/x.json", []string{"gateway/proxy/", "docs/results/"}},
		{"GET /api/v1/links and https://example.com/gateway/x", nil},
		{"api/openapi.yaml, then", []string{"api/openapi.yaml"}},
		{"a cmdx/y or xgateway/z", nil},
	}
	for _, tt := range tests {
		got := pathsIn(tt.text, dirs)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("pathsIn(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func rel(page string) string {
	r, err := filepath.Rel(repoRoot, page)
	if err != nil {
		return page
	}
	return r
}
