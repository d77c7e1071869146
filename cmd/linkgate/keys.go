//go:build !nopebble

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

func init() {
	commands["keys"] = command{"API keys: create, list, revoke (in the link store, or through a running server)", runKeys}
}

const keysHelp = `Manage API keys, kept hashed in the link store. A key's token is printed
once, by create: keep it. Scopes: links:create, links:read, links:write
(edit, delete), stats:read, admin (everything, keys included). A revoked
key is refused by every instance within a second.

With --server URL the command works through the keys API of that running
linkgate serve, with an admin key from $LINKGATE_API_KEY or --key-file
(never on the command line). Without it, the store (--store, as serve's)
is opened directly: stop the server that holds it first. Output is for
people; --json prints the API's JSON (one object a line) for scripts.

Subcommands:
  create --name NAME --scopes SCOPE,…
  list
  revoke ID`

// keyAdmin is what the keys command does, on a store or through a server.
type keyAdmin interface {
	create(ctx context.Context, name string, scopes []shortener.Scope) (httpapi.KeyJSON, error)
	list(ctx context.Context) ([]httpapi.KeyJSON, error)
	revoke(ctx context.Context, id string) error
}

// storeKeys manages the keys of a store opened directly.
type storeKeys struct{ ks shortener.KeyStore }

func (s storeKeys) create(ctx context.Context, name string, scopes []shortener.Scope) (httpapi.KeyJSON, error) {
	k, token, err := shortener.NewAPIKey(name, scopes, time.Now())
	if err != nil {
		return httpapi.KeyJSON{}, cli.Usagef("keys create: %s", shortener.ErrorMessage(err))
	}
	if err := s.ks.CreateKey(ctx, k); err != nil {
		return httpapi.KeyJSON{}, err
	}
	out := httpapi.KeyView(k)
	out.Token = token
	return out, nil
}

func (s storeKeys) list(ctx context.Context) ([]httpapi.KeyJSON, error) {
	keys, err := s.ks.ListKeys(ctx)
	out := make([]httpapi.KeyJSON, len(keys))
	for i, k := range keys {
		out[i] = httpapi.KeyView(k)
	}
	return out, err
}

func (s storeKeys) revoke(ctx context.Context, id string) error { return s.ks.DeleteKey(ctx, id) }

// serverKeys manages the keys of a running server through its API.
type serverKeys struct{ c *httpapi.Client }

func (s serverKeys) create(ctx context.Context, name string, scopes []shortener.Scope) (httpapi.KeyJSON, error) {
	return s.c.CreateKey(ctx, name, scopes)
}

func (s serverKeys) list(ctx context.Context) ([]httpapi.KeyJSON, error) { return s.c.ListKeys(ctx) }

func (s serverKeys) revoke(ctx context.Context, id string) error { return s.c.DeleteKey(ctx, id) }

func runKeys(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("keys", "linkgate keys <create|list|revoke> [flags]", keysHelp, env.Stderr)
	store := fs.String("store", "pebble:data/links", "the link store: pebble:DIR or dynamodb:TABLE")
	var remote remoteFlags
	remote.add(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON, one object a line")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	sub, rest := fs.Arg(0), fs.Args()
	if len(rest) > 0 {
		rest = rest[1:]
	}
	// Each subcommand parses its own flags (--help among them) before the
	// store is opened; the common flags may come before or after the
	// subcommand.
	subFlags := func(synopsis, about string) *flag.FlagSet {
		sfs := cli.NewFlagSet("keys "+sub, synopsis, about+"\n\n'linkgate help keys' says how --server and --store reach the keys.", env.Stderr)
		sfs.StringVar(store, "store", *store, "the link store: pebble:DIR or dynamodb:TABLE")
		remote.add(sfs)
		sfs.BoolVar(asJSON, "json", *asJSON, "print the API's JSON, one object a line")
		return sfs
	}
	open := func() (keyAdmin, func() error, error) {
		if remote.remote() {
			c, err := remote.client(env.Getenv)
			if err != nil {
				return nil, nil, err
			}
			return serverKeys{c}, func() error { return nil }, nil
		}
		s, err := openRecordStore(ctx, *store)
		if err != nil {
			return nil, nil, err
		}
		return storeKeys{s}, s.Close, nil
	}
	switch sub {
	case "create":
		cfs := subFlags("linkgate keys create --name NAME --scopes SCOPE,…",
			"Create an API key and print its token, once: keep it. Scopes: links:create,\nlinks:read, links:write (edit, delete), stats:read, admin (everything,\nkeys included).")
		name := cfs.String("name", "", "a `label` for people (\"ci\", \"marketing site\")")
		var scopes cli.ListFlag
		cfs.Var(&scopes, "scopes", "comma-separated `scopes`")
		if err := cli.Parse(cfs, rest, env.Getenv); err != nil {
			return err
		}
		sc := make([]shortener.Scope, len(scopes))
		for i, s := range scopes {
			sc[i] = shortener.Scope(strings.TrimSpace(s))
		}
		if _, _, err := shortener.NewAPIKey(*name, sc, time.Now()); err != nil {
			return cli.Usagef("keys create: %s", shortener.ErrorMessage(err))
		}
		ka, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		k, err := ka.create(ctx, *name, sc)
		if err != nil {
			return fmt.Errorf("keys create: %w", err)
		}
		if *asJSON {
			return printJSON(env.Stdout, k)
		}
		fmt.Fprintf(env.Stdout, "key %s (%s), scopes %s\n%s\n", k.ID, k.Name, joinScopes(k.Scopes), k.Token)
		fmt.Fprintln(env.Stderr, "The token above is shown only now: keep it.")
		return nil
	case "list":
		lfs := subFlags("linkgate keys list", "List the keys: id, name, scopes, when made and last used (never a token).")
		if err := cli.Parse(lfs, rest, env.Getenv); err != nil {
			return err
		}
		if lfs.NArg() != 0 {
			return cli.Usagef("keys list: unexpected arguments %q", lfs.Args())
		}
		ka, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		keys, err := ka.list(ctx)
		if err != nil {
			return fmt.Errorf("keys list: %w", err)
		}
		return printKeys(env.Stdout, keys, *asJSON)
	case "revoke":
		rfs := subFlags("linkgate keys revoke ID", "Revoke a key: every instance refuses it within a second.")
		if err := cli.Parse(rfs, rest, env.Getenv); err != nil {
			return err
		}
		if rfs.NArg() != 1 {
			return cli.Usagef("keys revoke: want the key's ID")
		}
		id := rfs.Arg(0)
		ka, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		if err := ka.revoke(ctx, id); err != nil {
			return fmt.Errorf("keys revoke %s: %w", id, err)
		}
		if *asJSON {
			return printJSON(env.Stdout, map[string]string{"revoked": id})
		}
		fmt.Fprintf(env.Stdout, "key %s revoked\n", id)
		return nil
	case "":
		fs.Usage()
		return cli.Usagef("keys: no subcommand given")
	}
	fs.Usage()
	return cli.Usagef("keys: unknown subcommand %q", sub)
}

// printKeys writes keys as a table, or as JSON Lines.
func printKeys(w io.Writer, keys []httpapi.KeyJSON, asJSON bool) error {
	if asJSON {
		for _, k := range keys {
			if err := printJSON(w, k); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSCOPES\tCREATED\tLAST USED")
	for _, k := range keys {
		used := "never"
		if k.LastUsed != nil {
			used = *k.LastUsed
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, joinScopes(k.Scopes), k.CreatedAt, used)
	}
	return tw.Flush()
}

func joinScopes(scopes []shortener.Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ",")
}
