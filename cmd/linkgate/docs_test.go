package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the generated flag indexes of docs/<command>.md (go generate ./...)")

const docsDir = "../../docs"

// helpText returns what `linkgate ARGS --help` prints.
func helpText(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, nil, append(args, "--help")...)
	if code != 0 {
		t.Fatalf("linkgate %s --help: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return strings.TrimRight(out+errOut, "\n") + "\n"
}

var subcommandRE = regexp.MustCompile(`(?m)^  ([a-z][a-z-]+)\s`)

// subcommands finds the subcommands a command's help names ("linkgate
// bench capacity", or an indented list under "Subcommands:"), keeping those
// that answer --help with their own usage line.
func subcommands(t *testing.T, name, help string) []string {
	t.Helper()
	candidates := map[string]bool{}
	for _, m := range regexp.MustCompile(`linkgate `+name+` ([a-z][a-z-]+)`).FindAllStringSubmatch(help, -1) {
		candidates[m[1]] = true
	}
	if _, list, ok := strings.Cut(help, "ubcommands:"); ok {
		for _, m := range subcommandRE.FindAllStringSubmatch(list, -1) {
			candidates[m[1]] = true
		}
	}
	var subs []string
	for c := range candidates {
		out, errOut, code := runCLI(t, nil, name, c, "--help")
		if code == 0 && strings.HasPrefix(out+errOut, "Usage: linkgate "+name+" "+c) {
			subs = append(subs, c)
		}
	}
	slices.Sort(subs)
	return subs
}

// flagRE finds the flags a --help lists: lines indented by two spaces
// that begin with -x or --name.
var flagRE = regexp.MustCompile(`(?m)^  (--?[A-Za-z][A-Za-z0-9_-]*)`)

// flagsOf returns the flags help lists, in its order.
func flagsOf(help string) []string {
	var out []string
	for _, m := range flagRE.FindAllStringSubmatch(help, -1) {
		out = append(out, m[1])
	}
	return out
}

// helpBlock is the generated part of a command's page: an index of its
// flags and its subcommands', between markers. `linkgate help` prints
// what each does: the CLI is the reference, the page says where to look.
func helpBlock(t *testing.T, name string) string {
	t.Helper()
	help := helpText(t, name)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n## Reference: `linkgate %s`\n\n", beginMarker(name), name)
	fmt.Fprintf(&b, "`linkgate help %s` prints what each flag does and its default", name)
	subs := subcommands(t, name, help)
	if len(subs) > 0 {
		fmt.Fprintf(&b, ", `linkgate %s SUBCOMMAND --help` a subcommand's", name)
	}
	b.WriteString("; every flag is also read from the environment variable LINKGATE_ and its name in capitals, - as _ (`--store`: LINKGATE_STORE), and a flag on the command line wins.\n\n")
	index := func(cmd, help string) {
		fmt.Fprintf(&b, "- `linkgate %s`:", cmd)
		flags := flagsOf(help)
		if len(flags) == 0 {
			b.WriteString(" no flags")
		}
		for i, f := range flags {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " `%s`", f)
		}
		b.WriteString("\n")
	}
	index(name, help)
	for _, sub := range subs {
		index(name+" "+sub, helpText(t, name, sub))
	}
	fmt.Fprintf(&b, "%s\n", endMarker(name))
	return b.String()
}

func beginMarker(name string) string {
	return "<!-- BEGIN generated: linkgate help " + name + " (go generate ./...; do not edit by hand) -->"
}

func endMarker(name string) string { return "<!-- END generated: linkgate help " + name + " -->" }

// Every command's page, docs/<command>.md, ends with the index of the
// flags `linkgate help <command>` (and its subcommands' --help) lists, so
// the index cannot drift from the flags.
func TestHelpDocs(t *testing.T) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range commands {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(docsDir, name+".md")
			block := helpBlock(t, name)
			page, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				page = []byte("# linkgate " + name + "\n\n" + commands[name].summary + ".\n")
			} else if err != nil {
				t.Fatal(err)
			}
			want := withBlock(string(page), name, block)
			if want == string(page) {
				return
			}
			if *updateDocs {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("rewrote %s", path)
				return
			}
			t.Errorf("docs/%s.md is out of date with `linkgate help %s`; regenerate it with: go generate ./...", name, name)
		})
	}
}

// withBlock replaces page's generated block for name with block, or
// appends it.
func withBlock(page, name, block string) string {
	begin, end := beginMarker(name), endMarker(name)
	i := strings.Index(page, begin)
	j := strings.Index(page, end)
	if i < 0 || j < i {
		return strings.TrimRight(page, "\n") + "\n\n" + block
	}
	return page[:i] + block + strings.TrimPrefix(page[j+len(end):], "\n")
}

// Every command's and subcommand's --help prints its usage once (links'
// subcommands, whose flags may follow their arguments, printed it twice).
func TestHelpPrintedOnce(t *testing.T) {
	for name := range commands {
		help := helpText(t, name)
		args := [][]string{{name}}
		for _, sub := range subcommands(t, name, help) {
			args = append(args, []string{name, sub})
		}
		for _, a := range args {
			if n := strings.Count(helpText(t, a...), "Usage: "); n != 1 {
				t.Errorf("linkgate %s --help prints its usage %d times, want once", strings.Join(a, " "), n)
			}
		}
	}
}
