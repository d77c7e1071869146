package httpapi

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// The statistics API (api/openapi.yaml, docs/visits.md):
//
//	GET /api/v1/links/{id}/stats[.csv]   one link (admin unless --stats-public)
//	GET /api/v1/stats[.csv]              all links, ?domain= ?tag= (stats:read)
//
// Query: from, to (RFC 3339 or YYYY-MM-DD, UTC; to exclusive), granularity
// (hour|day), bots (include|exclude|only), top (1–100), dimensions (a
// comma-separated subset of the top lists).

// statsJSON is the answer of both routes.
type statsJSON struct {
	ID          string                      `json:"id,omitempty"`
	From        string                      `json:"from"`
	To          string                      `json:"to"`
	Granularity string                      `json:"granularity"`
	Note        string                      `json:"note,omitempty"`
	Total       int64                       `json:"total"`
	People      int64                       `json:"people"`
	Bots        int64                       `json:"bots"`
	Series      []pointJSON                 `json:"series"`
	Top         map[string][]valueCountJSON `json:"top"`
	Links       *[]linkCountJSON            `json:"links,omitempty"` // all links only
	*legacyJSON                             // one link only
}

// legacyJSON are the per-link answer's fields from before the range
// queries, over the range asked for.
type legacyJSON struct {
	ByDay     []dayJSON     `json:"by_day"`    // oldest first, days with visits
	Referrers []hostJSON    `json:"referrers"` // busiest first; "(direct)" for none
	Browsers  []countJSON   `json:"browsers"`  // people's visits
	BotAgents []countJSON   `json:"bot_agents"`
	Countries []countryJSON `json:"countries"` // with --geoip
}

type pointJSON struct {
	T      string `json:"t"`
	Total  int64  `json:"total"`
	People int64  `json:"people"`
	Bots   int64  `json:"bots"`
}

type valueCountJSON struct {
	Value string `json:"value"`
	Count int64  `json:"count"`
}

type linkCountJSON struct {
	ID     string `json:"id"`
	Domain string `json:"domain"`
	URL    string `json:"url"`
	Count  int64  `json:"count"`
}

type hostJSON struct {
	Host  string `json:"host"`
	Count int64  `json:"count"`
}

type countryJSON struct {
	Code  string `json:"code"`
	Count int64  `json:"count"`
}

type dayJSON struct {
	Date  string `json:"date"`
	Count int64  `json:"count"`
}

type countJSON struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// legacyTop bounds the older per-link lists, as they were bounded before.
const legacyTop = shortener.MaxStatKeys - 1

// handleStats answers GET /api/v1/links/{id}/stats (id != nil) and GET
// /api/v1/stats, as JSON or, with asCSV, as CSV.
func (h *Handler) handleStats(ctx *fasthttp.RequestCtx, id []byte, asCSV bool) {
	if id == nil || !h.cfg.StatsPublic {
		if _, ok := h.authorize(ctx, shortener.ScopeStats); !ok {
			return
		}
	}
	q, err := h.statsQuery(ctx, id)
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	if id != nil {
		domain, ok := h.requestDomain(ctx)
		if !ok {
			return
		}
		q.Domain, q.ID = domain, string(id)
	}
	tctx, cancel := h.timeout()
	defer cancel()
	r, err := h.svc.VisitReport(tctx, q)
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if asCSV {
		ctx.Response.Header.SetContentType("text/csv; charset=utf-8")
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetBody(statsCSV(&r))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, h.statsAnswer(ctx, &r))
}

// statsQuery parses the query string of a statistics route.
func (h *Handler) statsQuery(ctx *fasthttp.RequestCtx, id []byte) (shortener.StatsQuery, error) {
	var q shortener.StatsQuery
	args := ctx.QueryArgs()
	var err error
	if q.From, err = parseStatsTime("from", args.Peek("from")); err != nil {
		return q, err
	}
	if q.To, err = parseStatsTime("to", args.Peek("to")); err != nil {
		return q, err
	}
	var ok bool
	if q.Granularity, ok = shortener.ParseGranularity(string(args.Peek("granularity"))); !ok {
		return q, shortener.Errorf(shortener.InvalidParameter, "unknown granularity %.40q: hour or day", args.Peek("granularity"))
	}
	if q.Bots, ok = shortener.ParseBotFilter(string(args.Peek("bots"))); !ok {
		return q, shortener.Errorf(shortener.InvalidParameter, "unknown bots %.40q: include, exclude or only", args.Peek("bots"))
	}
	if v := args.Peek("top"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > shortener.MaxTop {
			return q, shortener.Errorf(shortener.InvalidParameter, "top must be a whole number from 1 to %d", shortener.MaxTop)
		}
		q.Top = n
	}
	if v := args.Peek("dimensions"); v != nil {
		q.Dims = []shortener.Dimension{}
		for name := range strings.SplitSeq(string(v), ",") {
			d, ok := shortener.ParseDimension(name)
			if !ok {
				return q, shortener.Errorf(shortener.InvalidParameter, "unknown dimension %.40q: one of referrer, country, browser, os, device, bot, utm_source, utm_medium, utm_campaign", name)
			}
			q.Dims = append(q.Dims, d)
		}
	}
	if id == nil {
		if v := args.Peek("domain"); v != nil {
			d, err := h.namedDomain(ctx, string(v))
			if err != nil {
				return q, err
			}
			q.Domain, q.DomainSet = d, true
		}
		if v := args.Peek("tag"); v != nil {
			q.Tag = string(v)
			if _, err := shortener.ValidateTags([]string{q.Tag}); err != nil {
				return q, err
			}
		}
	}
	return q, nil
}

// parseStatsTime parses from or to: RFC 3339, or a date (midnight UTC).
func parseStatsTime(name string, v []byte) (time.Time, error) {
	if v == nil {
		return time.Time{}, nil
	}
	s := string(v)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(shortener.DayFormat, s); err == nil {
		return t, nil
	}
	return time.Time{}, shortener.Errorf(shortener.InvalidParameter, "%s must be an RFC 3339 time or a date (YYYY-MM-DD), not %.40q", name, s)
}

func (h *Handler) statsAnswer(ctx *fasthttp.RequestCtx, r *shortener.StatsReport) statsJSON {
	out := statsJSON{
		ID: r.Query.ID, From: r.Query.From.Format(time.RFC3339), To: r.Query.To.Format(time.RFC3339),
		Granularity: r.Query.Granularity.String(), Note: r.Note,
		Total: r.Total, People: r.People, Bots: r.Bots,
		Series: make([]pointJSON, len(r.Series)), Top: map[string][]valueCountJSON{},
	}
	for i, p := range r.Series {
		out.Series[i] = pointJSON{p.T.Format(time.RFC3339), p.Total, p.People, p.Bots}
	}
	for d := range shortener.NumDimensions {
		if r.Top[d] == nil && r.Query.Dims != nil {
			continue
		}
		l := make([]valueCountJSON, len(r.Top[d]))
		for i, c := range r.Top[d] {
			l[i] = valueCountJSON{c.Key, c.N}
		}
		out.Top[d.String()] = l
	}
	if r.Query.ID == "" {
		links := make([]linkCountJSON, len(r.Links))
		for i, lc := range r.Links {
			links[i] = linkCountJSON{ID: lc.Link.ID, Domain: h.domainName(ctx, lc.Link.Domain), URL: lc.Link.URL, Count: lc.Count}
		}
		out.Links = &links
		return out
	}
	old := &legacyJSON{ByDay: []dayJSON{}}
	out.legacyJSON = old
	var day string
	for _, p := range r.Series {
		if p.Total == 0 {
			continue
		}
		d := p.T.Format(shortener.DayFormat)
		if d == day {
			old.ByDay[len(old.ByDay)-1].Count += p.Total
			continue
		}
		day = d
		old.ByDay = append(old.ByDay, dayJSON{d, p.Total})
	}
	old.Referrers = legacy(r.Dims[shortener.DimReferrer], func(k string, n int64) hostJSON { return hostJSON{k, n} })
	old.Browsers = legacy(r.Dims[shortener.DimBrowser], func(k string, n int64) countJSON { return countJSON{k, n} })
	old.BotAgents = legacy(r.Dims[shortener.DimBot], func(k string, n int64) countJSON { return countJSON{k, n} })
	old.Countries = legacy(r.Dims[shortener.DimCountry], func(k string, n int64) countryJSON { return countryJSON{k, n} })
	return out
}

// legacy lists a breakdown as the older fields did: the busiest first,
// at most legacyTop and the rest as (other).
func legacy[T any](b shortener.Breakdown, mk func(string, int64) T) []T {
	top := shortener.TopOf(b, legacyTop)
	out := make([]T, len(top))
	for i, c := range top {
		out[i] = mk(c.Key, c.N)
	}
	return out
}

// statsCSV writes a report as CSV: the series (t,total,people,bots), a
// blank line, then dimension,value,count rows (the top lists, then, for
// all links, "link" rows with the link's key). Cells a spreadsheet would
// read as a formula (=, +, -, @ first) are prefixed with a quote.
func statsCSV(r *shortener.StatsReport) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"t", "total", "people", "bots"})
	for _, p := range r.Series {
		w.Write([]string{p.T.Format(time.RFC3339), strconv.FormatInt(p.Total, 10), strconv.FormatInt(p.People, 10), strconv.FormatInt(p.Bots, 10)})
	}
	w.Flush()
	b.WriteString("\n")
	w.Write([]string{"dimension", "value", "count"})
	for d := range shortener.NumDimensions {
		for _, c := range r.Top[d] {
			w.Write([]string{d.String(), cell(c.Key), strconv.FormatInt(c.N, 10)})
		}
	}
	for _, lc := range r.Links {
		w.Write([]string{"link", cell(lc.Link.Key()), strconv.FormatInt(lc.Count, 10)})
	}
	w.Flush()
	return b.Bytes()
}

func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
