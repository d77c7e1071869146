//go:build !nopebble

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// The commands that operate on links and keys (links, keys, store
// export|import|backup) work on a store directly, which only a stopped
// server's is open to, or on a running server through its API
// (httpapi.Client) with --server. The key for the API is never a flag:
// a command line is visible to every user of the machine (ps,
// /proc/PID/cmdline).

// envAPIKey holds the API key of --server; --key-file names a file
// holding it instead.
const envAPIKey = "LINKGATE_API_KEY"

// maxKeyFile bounds a --key-file.
const maxKeyFile = 4 << 10

// remoteFlags are the flags that point a command at a running server.
type remoteFlags struct {
	server, keyFile string
}

// add adds --server and --key-file to fs.
func (r *remoteFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&r.server, "server", r.server, "work through the API of the running linkgate serve at `URL` (such as http://127.0.0.1:8080) instead of opening --store; the key from $"+envAPIKey+" or --key-file")
	fs.StringVar(&r.keyFile, "key-file", r.keyFile, "`file` holding the API key for --server (instead of $"+envAPIKey+"); a key is never given on the command line")
}

// remote reports whether the command works through a server's API.
func (r *remoteFlags) remote() bool { return r.server != "" }

// client returns the API client of --server, with the key of --key-file
// or $LINKGATE_API_KEY.
func (r *remoteFlags) client(getenv func(string) string) (*httpapi.Client, error) {
	key := strings.TrimSpace(getenv(envAPIKey))
	if r.keyFile != "" {
		f, err := os.Open(r.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--key-file: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
		if err != nil {
			return nil, fmt.Errorf("--key-file: %w", err)
		}
		if len(b) > maxKeyFile {
			return nil, fmt.Errorf("--key-file %s: larger than %d bytes, not a key", r.keyFile, maxKeyFile)
		}
		key = strings.TrimSpace(string(b))
	}
	if key == "" {
		return nil, cli.Usagef("--server needs a key: put it in $%s or in a file named by --key-file", envAPIKey)
	}
	c, err := httpapi.NewClient(r.server, key, nil)
	if err != nil {
		return nil, cli.Usagef("--server: %v", err)
	}
	return c, nil
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
