//go:build !nopebble

package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener"
)

func init() {
	commands["keys"] = command{"API keys: create, list, revoke (in the link store)", runKeys}
}

const keysHelp = `Manage API keys, kept hashed in the link store (--store, as serve's).
A key's token is printed once, by create: keep it. Scopes: links:create,
links:read, links:write (edit, delete), stats:read, admin (everything, keys
included). A revoked key is refused by every instance within a second.

The embedded store is opened directly, so stop the server first (it holds
the store), or use the keys API of a running server instead:
  curl -H "Authorization: Bearer $ADMIN" -d '{"name":"ci","scopes":["links:create"]}' http://HOST/api/v1/keys

Subcommands:
  create --name NAME --scopes SCOPE,…
  list
  revoke ID`

func runKeys(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("keys", "linkgate keys <create|list|revoke> [flags]", keysHelp, env.Stderr)
	store := fs.String("store", "pebble:data/links", "the link store: pebble:DIR or dynamodb:TABLE")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	sub, rest := fs.Arg(0), fs.Args()
	if len(rest) > 0 {
		rest = rest[1:]
	}
	// Each subcommand parses its own flags (--help among them) before the
	// store is opened; --store may come before or after the subcommand.
	subFlags := func(synopsis string) *flag.FlagSet {
		sfs := cli.NewFlagSet("keys "+sub, synopsis, keysHelp, env.Stderr)
		sfs.StringVar(store, "store", *store, "the link store: pebble:DIR or dynamodb:TABLE")
		return sfs
	}
	open := func() (shortener.KeyStore, func() error, error) {
		s, err := openRecordStore(ctx, *store)
		if err != nil {
			return nil, nil, err
		}
		ks, ok := s.(shortener.KeyStore)
		if !ok {
			s.Close()
			return nil, nil, fmt.Errorf("%s keeps no API keys", *store)
		}
		return ks, s.Close, nil
	}
	switch sub {
	case "create":
		cfs := subFlags("linkgate keys create --name NAME --scopes SCOPE,…")
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
		k, token, err := shortener.NewAPIKey(*name, sc, time.Now())
		if err != nil {
			return cli.Usagef("keys create: %s", shortener.ErrorMessage(err))
		}
		ks, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		if err := ks.CreateKey(ctx, k); err != nil {
			return fmt.Errorf("keys create: %w", err)
		}
		fmt.Fprintf(env.Stdout, "key %s (%s), scopes %s\n%s\n", k.ID, k.Name, joinScopes(k.Scopes), token)
		fmt.Fprintln(env.Stderr, "The token above is shown only now: keep it.")
		return nil
	case "list":
		lfs := subFlags("linkgate keys list")
		if err := cli.Parse(lfs, rest, env.Getenv); err != nil {
			return err
		}
		if lfs.NArg() != 0 {
			return cli.Usagef("keys list: unexpected arguments %q", lfs.Args())
		}
		ks, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		keys, err := ks.ListKeys(ctx)
		if err != nil {
			return fmt.Errorf("keys list: %w", err)
		}
		w := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tSCOPES\tCREATED\tLAST USED")
		for _, k := range keys {
			used := "never"
			if !k.LastUsed.IsZero() {
				used = k.LastUsed.Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, joinScopes(k.Scopes), k.CreatedAt.Format(time.RFC3339), used)
		}
		return w.Flush()
	case "revoke":
		rfs := subFlags("linkgate keys revoke ID")
		if err := cli.Parse(rfs, rest, env.Getenv); err != nil {
			return err
		}
		if rfs.NArg() != 1 {
			return cli.Usagef("keys revoke: want the key's ID")
		}
		id := rfs.Arg(0)
		ks, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		if err := ks.DeleteKey(ctx, id); err != nil {
			return fmt.Errorf("keys revoke %s: %w", id, err)
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

func joinScopes(scopes []shortener.Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ",")
}
