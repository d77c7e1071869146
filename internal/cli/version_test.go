package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildString(t *testing.T) {
	tests := []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"no vcs", nil, "linkgate v0.1.0 commit unknown go1.26.8 linux/arm64"},
		{"clean", []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "false"}},
			"linkgate v0.1.0 commit 0123456789ab go1.26.8 linux/arm64"},
		{"dirty", []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"}},
			"linkgate v0.1.0 commit 0123456789ab+dirty go1.26.8 linux/arm64"},
		{"short revision", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}, "linkgate v0.1.0 commit abc go1.26.8 linux/arm64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Build{Name: "linkgate", Version: "v0.1.0", Go: "go1.26.8", Platform: "linux/arm64"}
			b.fromSettings(tt.settings)
			if got := b.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadBuildStampedCommit(t *testing.T) {
	for commit, want := range map[string]string{
		"0123456789abcdef0123456789abcdef01234567":       "commit 0123456789ab ",
		"0123456789abcdef0123456789abcdef01234567+dirty": "commit 0123456789ab+dirty ",
	} {
		if got := ReadBuild("linkgate", "v1", commit).String(); !strings.Contains(got, want) {
			t.Errorf("ReadBuild(%q) = %q, want it to contain %q", commit, got, want)
		}
	}
}
