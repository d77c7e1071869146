package conformance

import (
	"fmt"
	"path/filepath"
	"strings"
)

// FileSummary counts one APISIX file's cases.
type FileSummary struct {
	Source                                string
	Blocks, Ported, Pass, Differs, Failed int
	Skipped                               int
}

// Summarize counts results per file; blocks is the number of TEST blocks
// the case file lists.
func Summarize(f *File, results []Result) FileSummary {
	s := FileSummary{Source: f.Source, Blocks: len(f.Cases)}
	for _, r := range results {
		switch {
		case r.Skipped != "":
			s.Skipped++
		case r.Err == nil:
			s.Ported++
			s.Pass++
		case r.Differs != "":
			s.Ported++
			s.Differs++
		default:
			s.Ported++
			s.Failed++
		}
	}
	return s
}

// Table renders summaries as a Markdown table: one row per file, one per
// directory (t/admin, t/node…), the total, and the overall pass rate
// (pass / ported).
func Table(sums []FileSummary) string {
	var b strings.Builder
	b.WriteString("| APISIX 2.14.1 file | TEST blocks | ported | pass | differs | fail | skipped |\n|---|---|---|---|---|---|---|\n")
	row := func(name string, s FileSummary) {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d |\n", name, s.Blocks, s.Ported, s.Pass, s.Differs, s.Failed, s.Skipped)
	}
	var total FileSummary
	var dirs []string
	byDir := map[string]*FileSummary{}
	for _, s := range sums {
		row(s.Source, s)
		d := filepath.Dir(s.Source)
		if byDir[d] == nil {
			byDir[d] = &FileSummary{}
			dirs = append(dirs, d)
		}
		byDir[d].add(s)
		total.add(s)
	}
	for _, d := range dirs {
		row("**"+d+"/**", *byDir[d])
	}
	row("**total**", total)
	fmt.Fprintf(&b, "\nPass rate: %d of %d ported cases (%.1f %%); %d TEST blocks skipped.\n", total.Pass, total.Ported, total.Rate(), total.Skipped)
	return b.String()
}

func (s *FileSummary) add(o FileSummary) {
	s.Blocks += o.Blocks
	s.Ported += o.Ported
	s.Pass += o.Pass
	s.Differs += o.Differs
	s.Failed += o.Failed
	s.Skipped += o.Skipped
}

// Rate is pass / ported in percent.
func (s FileSummary) Rate() float64 {
	if s.Ported == 0 {
		return 0
	}
	return 100 * float64(s.Pass) / float64(s.Ported)
}
