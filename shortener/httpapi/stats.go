package httpapi

import (
	"cmp"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// statsJSON is GET /api/v1/links/{id}/stats.
type statsJSON struct {
	ID        string        `json:"id"`
	Total     int64         `json:"total"`
	Bots      int64         `json:"bots"`
	ByDay     []dayJSON     `json:"by_day"`    // oldest first
	Referrers []hostJSON    `json:"referrers"` // busiest first; "(direct)" for none
	Browsers  []countJSON   `json:"browsers"`  // human visits
	BotAgents []countJSON   `json:"bot_agents"`
	Countries []countryJSON `json:"countries"` // with --geoip
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

// counts lists a breakdown, busiest first, made into T by mk.
func counts[T any](b shortener.Breakdown, mk func(string, int64) T) []T {
	out := make([]T, 0, len(b))
	for _, c := range b.Sorted() {
		out = append(out, mk(c.Key, c.N))
	}
	return out
}

func named(k string, n int64) countJSON     { return countJSON{k, n} }
func host(k string, n int64) hostJSON       { return hostJSON{k, n} }
func country(k string, n int64) countryJSON { return countryJSON{k, n} }

func (h *Handler) handleStats(ctx *fasthttp.RequestCtx, id []byte) {
	if !h.cfg.StatsPublic {
		if _, ok := h.authorize(ctx, shortener.ScopeStats); !ok {
			return
		}
	}
	domain, ok := h.requestDomain(ctx)
	if !ok {
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	st, err := h.svc.Stats(tctx, domain, string(id))
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	out := statsJSON{ID: string(id), Total: st.Total, Bots: st.Bots, ByDay: make([]dayJSON, 0, len(st.Days)),
		Referrers: counts(st.Referrers, host), Browsers: counts(st.Browsers, named),
		BotAgents: counts(st.BotAgents, named), Countries: counts(st.Countries, country)}
	for d, n := range st.Days {
		out.ByDay = append(out.ByDay, dayJSON{d, n})
	}
	slices.SortFunc(out.ByDay, func(a, b dayJSON) int { return cmp.Compare(a.Date, b.Date) })
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, fasthttp.StatusOK, out)
}
