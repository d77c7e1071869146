package conformance

import (
	"fmt"
	"path/filepath"
	"strings"
)

// FileSummary counts one APISIX file's cases.
type FileSummary struct {
	Tag, Source                         string
	Blocks, Ported, Pass, Differs, Gaps int
	Failed                              int
	Skipped                             int
}

// Summarize counts results per file; blocks is the number of TEST blocks
// the case file lists.
func Summarize(f *File, results []Result) FileSummary {
	s := FileSummary{Tag: f.Tag, Source: f.Source, Blocks: len(f.Cases)}
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
		case r.Gap != "":
			s.Ported++
			s.Gaps++
		default:
			s.Ported++
			s.Failed++
		}
	}
	return s
}

// Tables renders one Table per APISIX release, in the order of sums.
func Tables(sums []FileSummary) string {
	var tags []string
	byTag := map[string][]FileSummary{}
	for _, s := range sums {
		if byTag[s.Tag] == nil {
			tags = append(tags, s.Tag)
		}
		byTag[s.Tag] = append(byTag[s.Tag], s)
	}
	var parts []string
	for _, t := range tags {
		parts = append(parts, Table(byTag[t]))
	}
	return strings.Join(parts, "\n")
}

// Table renders summaries of one release's files as a Markdown table: one
// row per file, one per directory (t/admin, t/node…), the total, and the
// overall pass rate (pass / ported).
func Table(sums []FileSummary) string {
	var b strings.Builder
	tag := "2.14.1"
	if len(sums) > 0 && sums[0].Tag != "" {
		tag = sums[0].Tag
	}
	gaps := false
	for _, s := range sums {
		gaps = gaps || s.Gaps > 0
	}
	if gaps {
		fmt.Fprintf(&b, "| APISIX %s file | TEST blocks | ported | pass | differs | gap | fail | skipped |\n|---|---|---|---|---|---|---|---|\n", tag)
	} else {
		fmt.Fprintf(&b, "| APISIX %s file | TEST blocks | ported | pass | differs | fail | skipped |\n|---|---|---|---|---|---|---|\n", tag)
	}
	row := func(name string, s FileSummary) {
		if gaps {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d |\n", name, s.Blocks, s.Ported, s.Pass, s.Differs, s.Gaps, s.Failed, s.Skipped)
			return
		}
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
	s.Gaps += o.Gaps
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
