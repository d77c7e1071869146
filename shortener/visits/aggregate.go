package visits

import (
	"hash/maphash"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// The pending aggregate is laid out for the redirect path, which touches
// it on every visit: per shard, a map from link id to an index into a
// slice of fixed-size, pointer-free records (a few adjacent cache lines
// per visit, nothing for the garbage collector to scan). Referrer hosts
// are kept as hashes, their text once per shard and batch; user agents as
// small per-shard numbers. Both slices and maps are reused from batch to
// batch.

// Per-link, per-batch bounds of the inline tables; what does not fit is
// counted under shortener.OtherKey (days: in a per-shard overflow list).
const (
	inlineDays      = 2
	inlineReferrers = 8
	inlineAgents    = 4
	inlineCountries = 4
)

// MaxReferrersPerBatch bounds the referrer hosts kept per link and batch;
// more fold into shortener.OtherKey.
const MaxReferrersPerBatch = inlineReferrers

// linkAgg is one link's pending visits: counters and small inline tables
// of keys with their counts (a count of 0 marks a free slot), in about
// three cache lines.
type linkAgg struct {
	total, bots                        uint32
	refOther, agentOther, countryOther uint32
	day                                [inlineDays]int32 // days since 1970-01-01, UTC
	dayN                               [inlineDays]uint32
	agent                              [inlineAgents]uint16 // see pending.agentNum
	agentN                             [inlineAgents]uint32
	country                            [inlineCountries]uint16 // two ASCII letters
	countryN                           [inlineCountries]uint32
	refN                               [inlineReferrers]uint32
	ref                                [inlineReferrers]uint64 // host hash, or hashDirect, hashInvalid
}

// bump counts one under key in the matching or first free slot (ns[i] ==
// 0) of keys. It reports whether it counted, and whether it took a new
// slot.
func bump[K comparable](keys []K, ns []uint32, key K) (counted, added bool) {
	for i := range ns {
		switch {
		case ns[i] == 0:
			keys[i], ns[i] = key, 1
			return true, true
		case keys[i] == key:
			ns[i]++
			return true, false
		}
	}
	return false, false
}

// extraDay is a visit on a day beyond a link's inline days (a batch that
// spans more than two UTC days, with a long flush interval).
type extraDay struct {
	idx int32
	day int32
	n   uint32
}

// pending is one shard's aggregate for one batch.
type pending struct {
	index     map[string]int32 // link id → position in links
	links     []linkAgg
	hosts     map[uint64]string // referrer host hash → host
	byID      [MaxAgentID]Agent // agents the classifier numbered
	agents    []Agent           // others: number - MaxAgentID - 1 → agent
	agentNums map[Agent]uint16
	extraDays []extraDay
	dayKeys   map[int32]string // formatted days, kept across batches
}

func newPending() *pending {
	return &pending{index: map[string]int32{}, hosts: map[uint64]string{}, agentNums: map[Agent]uint16{}, dayKeys: map[int32]string{}}
}

// reset empties p for reuse, keeping its memory.
func (p *pending) reset() {
	clear(p.index)
	clear(p.links)
	p.links = p.links[:0]
	clear(p.hosts)
	clear(p.agentNums)
	p.agents = p.agents[:0]
	clear(p.byID[:])
	p.extraDays = p.extraDays[:0]
}

// Special host hashes: no Referer, and one without a usable host.
const (
	hashDirect  = 1
	hashInvalid = 2
)

func (p *pending) add(l *linkAgg, idx int32, seed maphash.Seed, day int32, host []byte, agent Agent, country string) {
	l.total++
	if agent.Bot {
		l.bots++
	}
	if ok, _ := bump(l.day[:], l.dayN[:], day); !ok {
		p.addExtraDay(idx, day)
	}
	h := uint64(hashDirect)
	switch {
	case host == nil:
		h = hashInvalid
	case len(host) > 0:
		h = maphash.Bytes(seed, host) | 4 // never one of the special values
	}
	switch ok, added := bump(l.ref[:], l.refN[:], h); {
	case !ok:
		l.refOther++
	case added && h > hashInvalid:
		if _, known := p.hosts[h]; !known {
			p.hosts[h] = string(host)
		}
	}
	p.addAgentCountry(l, agent, country)
}

func (p *pending) addAgentCountry(l *linkAgg, agent Agent, country string) {
	num := p.agentNum(agent)
	if num == 0 {
		l.agentOther++
	} else if ok, _ := bump(l.agent[:], l.agentN[:], num); !ok {
		l.agentOther++
	}
	if len(country) == 2 {
		if ok, _ := bump(l.country[:], l.countryN[:], uint16(country[0])<<8|uint16(country[1])); !ok {
			l.countryOther++
		}
	}
}

// agentNum returns the number the aggregate keeps for agent: 1 + its ID
// when the classifier numbers it, else one of the numbers above
// MaxAgentID given out in this batch (0 when they run out).
func (p *pending) agentNum(agent Agent) uint16 {
	if agent.ID > 0 && agent.ID < MaxAgentID {
		if p.byID[agent.ID].Name == "" {
			p.byID[agent.ID] = agent
		}
		return agent.ID
	}
	num, ok := p.agentNums[agent]
	if !ok && len(p.agents) < 1<<16-MaxAgentID-1 {
		p.agents = append(p.agents, agent)
		num = uint16(MaxAgentID + len(p.agents))
		p.agentNums[agent] = num
	}
	return num
}

// agentOf is the agent behind a number agentNum gave.
func (p *pending) agentOf(num uint16) Agent {
	if num < MaxAgentID {
		return p.byID[num]
	}
	return p.agents[num-MaxAgentID-1]
}

func (p *pending) addExtraDay(idx int32, day int32) {
	for i := range p.extraDays {
		if e := &p.extraDays[i]; e.idx == idx && e.day == day {
			e.n++
			return
		}
	}
	p.extraDays = append(p.extraDays, extraDay{idx, day, 1})
}

// dayKey formats a day number as the Days key, once per day.
func (p *pending) dayKey(day int32) string {
	k, ok := p.dayKeys[day]
	if !ok {
		if len(p.dayKeys) > 64 {
			clear(p.dayKeys)
		}
		k = time.Unix(int64(day)*86400, 0).UTC().Format(shortener.DayFormat)
		p.dayKeys[day] = k
	}
	return k
}

// stats converts link idx's pending visits into domain statistics.
func (p *pending) stats(idx int32) shortener.VisitStats {
	l := &p.links[idx]
	s := shortener.VisitStats{Total: int64(l.total), Bots: int64(l.bots)}
	for i, n := range l.dayN {
		if n > 0 {
			inc(&s.Days, p.dayKey(l.day[i]), n)
		}
	}
	for _, e := range p.extraDays {
		if e.idx == idx {
			inc(&s.Days, p.dayKey(e.day), e.n)
		}
	}
	for i, n := range l.refN {
		switch h := l.ref[i]; {
		case n == 0:
		case h == hashDirect:
			inc(&s.Referrers, shortener.DirectReferrer, n)
		case h == hashInvalid:
			inc(&s.Referrers, InvalidReferrer, n)
		default:
			inc(&s.Referrers, p.hosts[h], n)
		}
	}
	inc(&s.Referrers, shortener.OtherKey, l.refOther)
	for i, n := range l.agentN {
		if n == 0 || l.agent[i] == 0 {
			continue
		}
		if a := p.agentOf(l.agent[i]); a.Bot {
			inc(&s.BotAgents, a.Name, n)
		} else {
			inc(&s.Browsers, a.Name, n)
		}
	}
	inc(&s.Browsers, shortener.OtherKey, l.agentOther)
	for i, n := range l.countryN {
		if n > 0 {
			inc(&s.Countries, string([]byte{byte(l.country[i] >> 8), byte(l.country[i])}), n)
		}
	}
	inc(&s.Countries, shortener.OtherKey, l.countryOther)
	return s
}

// inc adds n under key, making the breakdown if needed; 0 adds nothing.
func inc(b *shortener.Breakdown, key string, n uint32) {
	if n == 0 {
		return
	}
	if *b == nil {
		*b = shortener.Breakdown{}
	}
	(*b)[key] += int64(n)
}
