package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// buildLinkgate builds this tree's linkgate once per test run.
var buildLinkgate = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "linkgate-deploy-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "linkgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/linkgate").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func linkgate(t *testing.T) string {
	t.Helper()
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
