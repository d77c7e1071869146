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

// knownFlags returns the flags of every command and subcommand, by
// "command" and "command subcommand".
func knownFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	add := func(key, help string) {
		out[key] = map[string]bool{}
		for _, f := range flagsOf(help) {
			out[key][f] = true
		}
	}
	for name := range commands {
		help := helpText(t, name)
		add(name, help)
		for _, sub := range subcommands(t, name, help) {
			add(name+" "+sub, helpText(t, name, sub))
		}
	}
	return out
}

var (
	longFlagRE    = regexp.MustCompile(`(?:^|[\s\x60'"(\[/])(--[a-z][a-z0-9_-]*[a-z0-9])`)
	codeSpanRE    = regexp.MustCompile("\x60[^\x60\n]+\x60")
	commandLineRE = regexp.MustCompile(`\blinkgate ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?`)
	pastedHelpRE  = regexp.MustCompile(`(?m)^\$ linkgate (help [a-z]+|.*--help$)`)
)

// The CLI is the flags' reference and the pages name flags without
// copying it: every --flag a page names is one linkgate has — one of the
// command's (or a subcommand's) on a line of a code block or in a code
// span that runs it (`linkgate serve … --tls`), else one of any
// command's. Another program's flag goes with the program's name
// (`etcd --client-cert-auth`), and no page pastes a --help: `linkgate
// help X` prints it, current.
func TestDocsFlags(t *testing.T) {
	known := knownFlags(t)
	// has says whether cmd ("" for any command), with its subcommands,
	// has flag f.
	has := func(cmd, f string) bool {
		for key, flags := range known {
			if (cmd == "" || key == cmd || strings.HasPrefix(key, cmd+" ")) && flags[f] {
				return true
			}
		}
		return f == "--help"
	}
	n := 0
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if m := pastedHelpRE.FindString(string(b)); m != "" {
			t.Errorf("%s pastes the output of `%s`: name the flags and let `linkgate help` be the reference", rel(page), strings.TrimPrefix(m, "$ "))
		}
		fenced := false
		for i, line := range strings.Split(string(b), "\n") {
			if fenceRE.MatchString(line) {
				fenced = !fenced
				continue
			}
			// The pieces of the line to check, each with its command ("":
			// any); a piece running another program is skipped.
			type piece struct{ text, cmd string }
			var pieces []piece
			ofLinkgate := func(text string) {
				if m := commandLineRE.FindStringSubmatch(text); m != nil && known[m[1]] != nil {
					pieces = append(pieces, piece{text, m[1]})
				}
			}
			if fenced {
				ofLinkgate(line)
			} else {
				pieces = append(pieces, piece{codeSpanRE.ReplaceAllString(line, " "), ""})
				for _, span := range codeSpanRE.FindAllString(line, -1) {
					if strings.HasPrefix(span, "\x60-") {
						pieces = append(pieces, piece{span, ""})
					} else {
						ofLinkgate(span)
					}
				}
			}
			for _, p := range pieces {
				for _, m := range longFlagRE.FindAllStringSubmatch(p.text, -1) {
					n++
					if !has(p.cmd, m[1]) {
						where := "no command has"
						if p.cmd != "" {
							where = "linkgate " + p.cmd + " does not have"
						}
						t.Errorf("%s:%d names %s, which %s", rel(page), i+1, m[1], where)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no flag found on any page: the pattern is stale")
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
