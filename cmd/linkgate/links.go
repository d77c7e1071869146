//go:build !nopebble

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

func init() {
	commands["links"] = command{"links: list, get, create, edit, delete (through a running server, or in the link store)", runLinks}
}

const linksHelp = `List, show, create, edit and delete links.

With --server URL the command works through the API of that running
linkgate serve, with a key from $LINKGATE_API_KEY or --key-file (never on
the command line): its scopes decide what it may do (links:read to list,
links:create to create, links:write to edit and delete; admin all). Without
it, the store (--store, as serve's) is opened directly: stop the server
that holds it first. Output is for people; --json prints the API's JSON,
one link a line, for scripts.

Subcommands:
  list [--tag T] [--q TEXT] [--domain D] [--limit N]
  get ID [--domain D]
  create URL [--slug S] [--expires T] [--max-visits N] [--tags T,…] [--forward-query on|off]
  edit ID [--url U] [--expires T|never] [--max-visits N] [--tags T,…] [--forward-query on|off|default]
  delete ID [--domain D]

Times (--expires) are RFC 3339 (2030-01-02T15:04:05Z) or a duration from
now (720h).`

const (
	linksTimes   = "Times (--expires) are RFC 3339 (2030-01-02T15:04:05Z) or a duration from\nnow (720h)."
	linksSeeHelp = "'linkgate help links' says how --server and --store reach the links,\nand which key scopes each subcommand needs."
)

// linkAdmin is what the links command does, on a store or through a
// server. domain is a domain's name ("" the default).
type linkAdmin interface {
	list(ctx context.Context, q httpapi.ListQuery) ([]httpapi.LinkJSON, string, error)
	get(ctx context.Context, domain, id string) (httpapi.LinkJSON, error)
	create(ctx context.Context, r shortener.CreateRequest) (httpapi.LinkJSON, error)
	edit(ctx context.Context, domain, id string, u shortener.LinkUpdate) (httpapi.LinkJSON, error)
	remove(ctx context.Context, domain, id string) error
}

// serverLinks works through a server's API.
type serverLinks struct{ c *httpapi.Client }

func (s serverLinks) list(ctx context.Context, q httpapi.ListQuery) ([]httpapi.LinkJSON, string, error) {
	return s.c.ListLinks(ctx, q)
}
func (s serverLinks) get(ctx context.Context, domain, id string) (httpapi.LinkJSON, error) {
	return s.c.GetLink(ctx, domain, id)
}
func (s serverLinks) create(ctx context.Context, r shortener.CreateRequest) (httpapi.LinkJSON, error) {
	return s.c.CreateLink(ctx, r)
}
func (s serverLinks) edit(ctx context.Context, domain, id string, u shortener.LinkUpdate) (httpapi.LinkJSON, error) {
	return s.c.UpdateLink(ctx, domain, id, u)
}
func (s serverLinks) remove(ctx context.Context, domain, id string) error {
	return s.c.DeleteLink(ctx, domain, id)
}

// storeLinks works on a store opened directly, through the domain's
// Service (its URL rules: http and https, no loopback targets).
type storeLinks struct{ svc *shortener.Service }

func (s storeLinks) list(ctx context.Context, q httpapi.ListQuery) ([]httpapi.LinkJSON, string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = httpapi.DefaultPageSize
	}
	var p shortener.Page
	var err error
	if q.Filter != (shortener.ListFilter{}) {
		p, err = s.svc.Find(ctx, q.Cursor, limit, q.Filter)
	} else {
		p, err = s.svc.List(ctx, q.Cursor, limit)
	}
	out := make([]httpapi.LinkJSON, len(p.Links))
	for i, l := range p.Links {
		out[i] = httpapi.LinkView(l)
	}
	return out, p.Next, err
}
func (s storeLinks) get(ctx context.Context, domain, id string) (httpapi.LinkJSON, error) {
	l, err := s.svc.Get(ctx, domain, id)
	return httpapi.LinkView(l), err
}
func (s storeLinks) create(ctx context.Context, r shortener.CreateRequest) (httpapi.LinkJSON, error) {
	l, err := s.svc.Create(ctx, r)
	return httpapi.LinkView(l), err
}
func (s storeLinks) edit(ctx context.Context, domain, id string, u shortener.LinkUpdate) (httpapi.LinkJSON, error) {
	l, err := s.svc.Update(ctx, domain, id, u, "")
	return httpapi.LinkView(l), err
}
func (s storeLinks) remove(ctx context.Context, domain, id string) error {
	return s.svc.Delete(ctx, domain, id)
}

// timeFlag is --expires: an RFC 3339 time, a duration from now, or (with
// never) the zero time. set says it was given.
type timeFlag struct {
	t          time.Time
	set, never bool
	allowNever bool
}

func (f *timeFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	f.set = true
	if s == "never" && f.allowNever {
		f.t, f.never = time.Time{}, true
		return nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		f.t = time.Now().Add(d).UTC().Truncate(time.Second)
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return errors.New("want an RFC 3339 time (2030-01-02T15:04:05Z) or a duration from now (720h)")
	}
	f.t = t.UTC()
	return nil
}

// forwardFlag is --forward-query: on, off (or default, for an edit).
type forwardFlag struct {
	f   shortener.Forward
	set bool
}

func (f *forwardFlag) String() string {
	switch f.f {
	case shortener.ForwardOn:
		return "on"
	case shortener.ForwardOff:
		return "off"
	}
	return ""
}

func (f *forwardFlag) Set(s string) error {
	switch s {
	case "on", "true":
		f.f = shortener.ForwardOn
	case "off", "false":
		f.f = shortener.ForwardOff
	case "default":
		f.f = shortener.ForwardDefault
	default:
		return errors.New("want on, off or default")
	}
	f.set = true
	return nil
}

func runLinks(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("links", "linkgate links <list|get|create|edit|delete> [flags]", linksHelp, env.Stderr)
	store := fs.String("store", "pebble:data/links", "the link store: pebble:DIR or dynamodb:TABLE")
	var remote remoteFlags
	remote.add(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON, one link a line")
	domain := fs.String("domain", "", "the links' `domain` (a --domain of the server); default: the server's first")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	sub, rest := fs.Arg(0), fs.Args()
	if len(rest) > 0 {
		rest = rest[1:]
	}
	// A subcommand's help says what it does; the common part (--server,
	// --store, scopes, output) is the command's, which it points to.
	subFlags := func(synopsis, about string) *flag.FlagSet {
		sfs := cli.NewFlagSet("links "+sub, synopsis, about+"\n\n"+linksSeeHelp, env.Stderr)
		sfs.StringVar(store, "store", *store, "the link store: pebble:DIR or dynamodb:TABLE")
		remote.add(sfs)
		sfs.BoolVar(asJSON, "json", *asJSON, "print the API's JSON, one link a line")
		sfs.StringVar(domain, "domain", *domain, "the link's `domain` (a --domain of the server); default: the server's first")
		return sfs
	}
	open := func() (linkAdmin, func() error, error) {
		if remote.remote() {
			c, err := remote.client(env.Getenv)
			if err != nil {
				return nil, nil, err
			}
			return serverLinks{c}, func() error { return nil }, nil
		}
		s, err := openRecordStore(ctx, *store)
		if err != nil {
			return nil, nil, err
		}
		return storeLinks{shortener.NewService(s, shortener.Options{})}, s.Close, nil
	}
	// one runs a subcommand on one link given as the only argument.
	one := func(sfs *flag.FlagSet, what string, fn func(la linkAdmin, id string) (httpapi.LinkJSON, error)) error {
		if err := parseMixed(sfs, rest, env.Getenv); err != nil {
			return err
		}
		if sfs.NArg() != 1 {
			return cli.Usagef("links %s: want the link's ID", sub)
		}
		la, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		l, err := fn(la, sfs.Arg(0))
		if err != nil {
			return fmt.Errorf("links %s %s: %w", sub, sfs.Arg(0), err)
		}
		return printLink(env.Stdout, what, l, *asJSON)
	}
	switch sub {
	case "list":
		lfs := subFlags("linkgate links list [--tag T] [--q TEXT] [--domain D] [--limit N]",
			"List links, every domain's unless --domain names one.")
		tag := lfs.String("tag", "", "only links with this `tag`")
		q := lfs.String("q", "", "only links whose id or URL contains `text`")
		limit := lfs.Int("limit", 100, "at most `N` links, newest first when filtered (0: all)")
		if err := cli.Parse(lfs, rest, env.Getenv); err != nil {
			return err
		}
		if lfs.NArg() != 0 || *limit < 0 {
			return cli.Usagef("links list: no arguments, --limit ≥ 0")
		}
		query := httpapi.ListQuery{Filter: shortener.ListFilter{Tag: *tag, Query: *q}}
		if set(lfs, "domain") || set(fs, "domain") {
			query.Filter.Domain = domain
		}
		la, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		return listLinks(ctx, env.Stdout, la, query, *limit, *asJSON)
	case "get":
		return one(subFlags("linkgate links get ID [--domain D]", "Show one link."), "", func(la linkAdmin, id string) (httpapi.LinkJSON, error) {
			return la.get(ctx, *domain, id)
		})
	case "create":
		cfs := subFlags("linkgate links create URL [--slug S] [--expires T] [--max-visits N] [--tags T,…] [--forward-query on|off]",
			"Create a link to URL.\n\n"+linksTimes)
		slug := cfs.String("slug", "", "the link's `id` (3–64 of a-z A-Z 0-9 _ -); default: a random one")
		var expires timeFlag
		cfs.Var(&expires, "expires", "when the link stops redirecting: an RFC 3339 `time` or a duration from now")
		maxVisits := cfs.Int64("max-visits", 0, "the link answers 410 after `N` visits (0: unlimited)")
		var tags cli.ListFlag
		cfs.Var(&tags, "tags", "comma-separated `tags`")
		var fwd forwardFlag
		cfs.Var(&fwd, "forward-query", "add the visitor's query string to the target: on or off (default: as the server is set)")
		if err := parseMixed(cfs, rest, env.Getenv); err != nil {
			return err
		}
		if cfs.NArg() != 1 {
			return cli.Usagef("links create: want the URL")
		}
		la, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		l, err := la.create(ctx, shortener.CreateRequest{URL: cfs.Arg(0), Slug: *slug, ExpiresAt: expires.t, MaxVisits: *maxVisits,
			Tags: tags, ForwardQuery: fwd.f, Domain: *domain})
		if err != nil {
			return fmt.Errorf("links create: %w", err)
		}
		return printLink(env.Stdout, "created", l, *asJSON)
	case "edit":
		efs := subFlags("linkgate links edit ID [--url U] [--expires T|never] [--max-visits N] [--tags T,…] [--forward-query on|off|default]",
			"Change a link in place: only what a flag names.\n\n"+linksTimes)
		url := efs.String("url", "", "the new target `URL`")
		expires := timeFlag{allowNever: true}
		efs.Var(&expires, "expires", "the new expiry: an RFC 3339 `time`, a duration from now, or never")
		maxVisits := efs.Int64("max-visits", 0, "the new visit limit `N` (0: unlimited)")
		tags := efs.String("tags", "", "the new comma-separated `tags` (\"\": none)")
		var fwd forwardFlag
		efs.Var(&fwd, "forward-query", "add the visitor's query string: on, off or default")
		return one(efs, "edited", func(la linkAdmin, id string) (httpapi.LinkJSON, error) {
			var u shortener.LinkUpdate
			if set(efs, "url") {
				u.URL = url
			}
			if expires.set {
				u.ExpiresAt = &expires.t
			}
			if set(efs, "max-visits") {
				u.MaxVisits = maxVisits
			}
			if set(efs, "tags") {
				t := []string{}
				for _, tag := range strings.Split(*tags, ",") {
					if tag = strings.TrimSpace(tag); tag != "" {
						t = append(t, tag)
					}
				}
				u.Tags = &t
			}
			if fwd.set {
				u.ForwardQuery = &fwd.f
			}
			if u == (shortener.LinkUpdate{}) {
				return httpapi.LinkJSON{}, cli.Usagef("links edit: nothing to change (--url, --expires, --max-visits, --tags, --forward-query)")
			}
			return la.edit(ctx, *domain, id, u)
		})
	case "delete":
		dfs := subFlags("linkgate links delete ID [--domain D]", "Delete a link and its statistics.")
		if err := parseMixed(dfs, rest, env.Getenv); err != nil {
			return err
		}
		if dfs.NArg() != 1 {
			return cli.Usagef("links delete: want the link's ID")
		}
		la, closeStore, err := open()
		if err != nil {
			return err
		}
		defer closeStore()
		id := dfs.Arg(0)
		if err := la.remove(ctx, *domain, id); err != nil {
			return fmt.Errorf("links delete %s: %w", id, err)
		}
		if *asJSON {
			return printJSON(env.Stdout, map[string]string{"deleted": id})
		}
		fmt.Fprintf(env.Stdout, "link %s deleted\n", id)
		return nil
	case "":
		fs.Usage()
		return cli.Usagef("links: no subcommand given")
	}
	fs.Usage()
	return cli.Usagef("links: unknown subcommand %q", sub)
}

// parseMixed parses args as cli.Parse does, with flags before or after
// the arguments (links create URL --slug S), as people type them.
func parseMixed(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			// fs has printed its usage: the error as cli.Parse reports
			// it, without parsing (and printing) again.
			if errors.Is(err, flag.ErrHelp) {
				return flag.ErrHelp
			}
			return &cli.UsageError{Err: err}
		}
		if fs.NArg() == 0 {
			break
		}
		// A "--" ends the flags: what follows is arguments.
		if i := len(args) - fs.NArg(); i > 0 && args[i-1] == "--" {
			pos = append(pos, fs.Args()...)
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return cli.Parse(fs, append([]string{"--"}, pos...), getenv)
}

// set reports whether flag name was given (on the command line or in the
// environment).
func set(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// listLinks prints up to limit links (0: all), page by page.
func listLinks(ctx context.Context, w io.Writer, la linkAdmin, q httpapi.ListQuery, limit int, asJSON bool) error {
	var tw *tabwriter.Writer
	if !asJSON {
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tURL\tCREATED\tEXPIRES\tMAX VISITS\tTAGS")
	}
	n := 0
	for {
		q.Limit = shortener.MaxPageSize
		if limit > 0 {
			q.Limit = min(q.Limit, limit-n)
		}
		page, next, err := la.list(ctx, q)
		if err != nil {
			return fmt.Errorf("links list: %w", err)
		}
		for _, l := range page {
			if asJSON {
				if err := printJSON(w, l); err != nil {
					return err
				}
				continue
			}
			id := l.ID
			if l.Domain != "" && l.ShortURL == "" {
				id = l.Domain + "/" + l.ID
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", id, l.URL, orDash(l.CreatedAt), orDash(l.ExpiresAt), countOrDash(l.MaxVisits), strings.Join(l.Tags, ","))
		}
		n += len(page)
		if q.Cursor = next; next == "" || limit > 0 && n >= limit {
			break
		}
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

// printLink prints one link: a few lines for people, or its JSON.
func printLink(w io.Writer, what string, l httpapi.LinkJSON, asJSON bool) error {
	if asJSON {
		return printJSON(w, l)
	}
	if what != "" {
		fmt.Fprintf(w, "%s ", what)
	}
	short := l.ShortURL
	if short == "" {
		short = l.ID
	}
	fmt.Fprintf(w, "%s → %s\n", short, l.URL)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  id\t%s\n", l.ID)
	if l.Domain != "" {
		fmt.Fprintf(tw, "  domain\t%s\n", l.Domain)
	}
	fmt.Fprintf(tw, "  created\t%s\n  expires\t%s\n  max visits\t%s\n", orDash(l.CreatedAt), orDash(l.ExpiresAt), countOrDash(l.MaxVisits))
	if len(l.Tags) > 0 {
		fmt.Fprintf(tw, "  tags\t%s\n", strings.Join(l.Tags, ","))
	}
	if l.ForwardQuery != nil {
		fmt.Fprintf(tw, "  forward query\t%t\n", *l.ForwardQuery)
	}
	return tw.Flush()
}

func orDash(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func countOrDash(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}
