package nginxre

import "testing"

func TestSubGsub(t *testing.T) {
	for _, tc := range []struct {
		pattern, options, src, tmpl, sub, gsub string
	}{
		{"hello", "jo", "hello world hello", "hi", "hi world hello", "hi world hi"},
		{"HELLO", "i", "hello world", "hi", "hi world", "hi world"},
		{`(\w+) (\w+)`, "jo", "ab cd ef gh", "$2 $1", "cd ab ef gh", "cd ab gh ef"},
		{`(\d)`, "", "a1b2", "<$1x>", "a<1x>b2", "a<1x>b<2x>"},
		{`(\d)`, "", "a1", "${1}$$", "a1$", "a1$"},
		{`(\d)`, "", "a1", "[$0]", "a[1]", "a[1]"},
		{`nomatch`, "", "abc", "x", "abc", "abc"},
		{` a  b # comment`, "x", "ab", "X", "X", "X"},
		// PCRE's $ matches before a final newline (response-rewrite2.t TEST 12).
		{`\w\S+$`, "jo", "hello world\n", "*", "hello *\n", "hello *\n"},
		{`o$`, "", "foo\n", "0", "fo0\n", "fo0\n"},
		{`[$]`, "", "a$\n", "S", "aS\n", "aS\n"},
	} {
		re, err := Compile(tc.pattern, tc.options)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		if got, _ := Sub(re, nil, []byte(tc.src), []byte(Template(tc.tmpl))); string(got) != tc.sub {
			t.Errorf("sub %q %q %q = %q, want %q", tc.pattern, tc.src, tc.tmpl, got, tc.sub)
		}
		if got, _ := Gsub(re, nil, []byte(tc.src), []byte(Template(tc.tmpl))); string(got) != tc.gsub {
			t.Errorf("gsub %q %q %q = %q, want %q", tc.pattern, tc.src, tc.tmpl, got, tc.gsub)
		}
	}
	if _, err := Compile("a", "q"); err == nil {
		t.Error("unknown option accepted")
	}
	if _, err := Compile(`(a)\1`, ""); err == nil {
		t.Error("a backreference compiled")
	}
}

func TestCheckTemplate(t *testing.T) {
	for tmpl, ok := range map[string]bool{
		"/$1": true, "/${1}/x": true, "$0$$": true, "no vars": true,
		"/$`1": false, "/$x": false, "/${x}": false, "/${1": false, "/$": false,
	} {
		if err := CheckTemplate(tmpl); (err == nil) != ok {
			t.Errorf("CheckTemplate(%q) = %v, want ok %v", tmpl, err, ok)
		}
	}
}
