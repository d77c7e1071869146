package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// noticeHeader opens NOTICE; the list of included software follows.
const noticeHeader = `linkgate
Copyright 2026 The linkgate Authors

Licensed under the Apache License, Version 2.0 (see LICENSE).

The linkgate and linkgate-extension binaries (linux/amd64, linux/arm64)
include the software listed below, each under the licences its own licence
files name; every release archive carries those files in licenses/. This
list is generated from the modules linked into the binaries: regenerate it
with 'go generate ./...' (a test fails when it is out of date).

`

// renderNotice writes NOTICE: the header, one line per included module with
// its licences, then the NOTICE files of those that ship one (Apache-2.0,
// section 4(d), asks for them to be passed on).
func renderNotice(mods []module) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(noticeHeader)
	width := 0
	for _, m := range mods {
		width = max(width, len(displayName(m)))
	}
	for _, m := range mods {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, displayName(m), licenseExpression(m))
	}
	for _, m := range mods {
		if n := licenseNotes[m.Path]; n.credit != "" {
			fmt.Fprintf(&b, "\n--- %s ---\n\n%s\n", m.Path, n.credit)
		}
	}
	for _, m := range mods {
		for _, f := range m.Files {
			if !isNotice(f) || m.Path == "std" {
				continue
			}
			text, err := os.ReadFile(filepath.Join(m.Dir, f))
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "\n--- %s: %s ---\n\n%s\n", m.Path, f, strings.TrimSpace(string(text)))
		}
	}
	return b.Bytes(), nil
}

// licenseNotes says, for the modules whose licence files alone do not tell,
// under which licences they are offered (an SPDX expression) and the credit
// a licence asks for in the documentation.
var licenseNotes = map[string]struct{ expression, credit string }{
	"github.com/boyter/go-string": {expression: "MIT OR Unlicense"},
	"github.com/golang/freetype": {
		expression: "FTL OR GPL-2.0-or-later",
		credit:     "linkgate takes it under the FreeType License (FTL), which asks for this:\nPortions of this software are copyright © 2010 The FreeType Project\n(www.freetype.org). All rights reserved.",
	},
}

// licenseExpression is how NOTICE states m's licences.
func licenseExpression(m module) string {
	if n, ok := licenseNotes[m.Path]; ok {
		return n.expression
	}
	return strings.Join(m.Licenses, ", ")
}

// displayName is how NOTICE names a module: its path, without a version
// (versions are in each release's SBOM), so that a dependency update does
// not change NOTICE.
func displayName(m module) string {
	if m.Path == "std" {
		return "Go (standard library and runtime)"
	}
	return m.Path
}
