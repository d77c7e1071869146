package visits

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"time"

	"github.com/linkgate/linkgate/internal/pace"
	"github.com/linkgate/linkgate/shortener"
)

// The aggregate is the drainer's: the visits of one batch, per link, laid
// out for the garbage collector to ignore: an open-addressed table of
// int32 slots over a slice of fixed-size entries, the ids in one byte
// arena, each link's counters in a chain of pairs (key, count) in one
// shared slice, and the batch's keys (days, referrer hosts, agents,
// countries) numbered in a dictionary. All of it is reused from batch to
// batch.

// Per-link, per-batch bounds: a link's referrer hosts, agents and
// countries beyond these are counted under shortener.OtherKey (the store
// keeps larger bounds over all batches, shortener.MaxStatReferrers…).
// Days are not bounded.
const (
	MaxReferrersPerBatch = 8
	maxAgentsPerBatch    = 4
	maxCountriesPerBatch = 4
)

// Dimensions of a visit, each counted under one key.
const (
	dimDay = iota
	dimReferrer
	dimAgent
	dimCountry
	numDims
)

var dimBound = [numDims]uint8{0, MaxReferrersPerBatch, maxAgentsPerBatch, maxCountriesPerBatch}

// entry is one link's visits in the batch.
type entry struct {
	hash    uint64
	idOff   uint32 // id in the arena
	total   uint32
	bots    uint32
	head    int32          // this link's first pair, -1: none
	last    [numDims]int32 // per dimension, the pair counted last
	created int64          // the link's CreatedAt, Unix seconds: the latest seen
	idLen   uint8
	limited bool
	keys    [numDims]uint8 // distinct keys per dimension
}

// pair counts visits of one link under one key.
type pair struct {
	key  uint32 // dictionary index
	n    uint32
	next int32 // the link's next pair, -1: none
}

// aggregate is one batch being collected.
type aggregate struct {
	seed    maphash.Seed
	slots   []int32 // entry index + 1; 0: free
	entries []entry
	arena   []byte
	pairs   []pair
	dict    dict
	order   []sortKey // batch building
	spare   []sortKey // radix sort's other half
	counts  []shortener.KeyCount
}

func newAggregate(seed maphash.Seed) *aggregate {
	return &aggregate{seed: seed, slots: make([]int32, 1024), dict: newDict()}
}

func (g *aggregate) links() int { return len(g.entries) }

// find returns the entry of id, or nil.
func (g *aggregate) find(h uint64, id []byte) *entry {
	mask := uint64(len(g.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := g.slots[i]
		if s == 0 {
			return nil
		}
		if e := &g.entries[s-1]; e.hash == h && string(g.arena[e.idOff:e.idOff+uint32(e.idLen)]) == string(id) {
			return e
		}
	}
}

// insert adds an entry for id, which must not be present.
func (g *aggregate) insert(h uint64, id []byte) *entry {
	if 2*(len(g.entries)+1) > len(g.slots) {
		g.grow()
	}
	g.entries = append(g.entries, entry{hash: h, idOff: uint32(len(g.arena)), idLen: uint8(len(id)), head: -1, last: [numDims]int32{-1, -1, -1, -1}})
	g.arena = append(g.arena, id...)
	g.place(h, int32(len(g.entries)))
	return &g.entries[len(g.entries)-1]
}

func (g *aggregate) place(h uint64, slot int32) {
	mask := uint64(len(g.slots) - 1)
	i := h & mask
	for g.slots[i] != 0 {
		i = (i + 1) & mask
	}
	g.slots[i] = slot
}

func (g *aggregate) grow() {
	g.slots = make([]int32, 2*len(g.slots))
	for i := range g.entries {
		g.place(g.entries[i].hash, int32(i+1))
	}
}

func (g *aggregate) id(e *entry) []byte { return g.arena[e.idOff : e.idOff+uint32(e.idLen)] }

// count adds n visits of e under key, in dimension dim: a link keeps at
// most dimBound[dim] keys of a bounded dimension per batch, the rest
// under other.
func (g *aggregate) count(e *entry, dim int, key uint32, n uint32) {
	if p := e.last[dim]; p >= 0 && g.pairs[p].key == key {
		g.pairs[p].n += n
		return
	}
	for p := e.head; p >= 0; p = g.pairs[p].next {
		if g.pairs[p].key == key {
			g.pairs[p].n += n
			e.last[dim] = p
			return
		}
	}
	if b := dimBound[dim]; b > 0 && !g.dict.isOther(dim, key) {
		if e.keys[dim] >= b {
			g.count(e, dim, g.dict.other(dim), n)
			return
		}
		e.keys[dim]++
	}
	g.pairs = append(g.pairs, pair{key: key, n: n, next: e.head})
	e.head = int32(len(g.pairs) - 1)
	e.last[dim] = e.head
}

// reset empties g for the next batch, keeping its memory.
func (g *aggregate) reset() {
	clear(g.slots)
	g.entries = g.entries[:0]
	g.arena = g.arena[:0]
	g.pairs = g.pairs[:0]
	g.dict.reset()
}

// stats returns e's visits as domain statistics.
func (g *aggregate) stats(e *entry) shortener.VisitStats {
	st := shortener.VisitStats{Total: int64(e.total), Bots: int64(e.bots)}
	for p := e.head; p >= 0; p = g.pairs[p].next {
		k := g.dict.keys[g.pairs[p].key]
		bd := st.Breakdown(k.Kind)
		if *bd == nil {
			*bd = shortener.Breakdown{}
		}
		(*bd)[k.Name] += int64(g.pairs[p].n)
	}
	return st
}

// addBatch adds the links of b (a batch the store refused) to g, bounds
// aside.
func (g *aggregate) addBatch(b *shortener.VisitBatch) {
	keys := make([]uint32, len(b.Keys))
	for i, k := range b.Keys {
		keys[i] = g.dict.lookup(k)
	}
	for i := range b.Links {
		l := &b.Links[i]
		id := []byte(l.ID)
		h := maphash.Bytes(g.seed, id)
		e := g.find(h, id)
		if e == nil {
			e = g.insert(h, id)
		}
		e.total += uint32(l.Total)
		e.bots += uint32(l.Bots)
		e.limited = e.limited || l.Limited
		e.created = max(e.created, l.CreatedAt)
		for _, c := range l.Counts {
			g.count(e, kindDim[b.Keys[c.Key].Kind], keys[c.Key], uint32(c.N))
		}
	}
}

var kindDim = [shortener.NumVisitKinds]int{
	shortener.KindDay: dimDay, shortener.KindReferrer: dimReferrer,
	shortener.KindBrowser: dimAgent, shortener.KindBot: dimAgent, shortener.KindCountry: dimCountry,
}

// sortKey orders entries by id: the id's first 8 bytes, big-endian (ids
// have no NUL bytes, so zero padding sorts a prefix first), then the rest.
type sortKey struct {
	prefix uint64
	entry  int32
}

func idPrefix(id []byte) uint64 {
	var b [8]byte
	copy(b[:], id)
	return binary.BigEndian.Uint64(b[:])
}

// radixSort sorts a by prefix, a byte at a time from the last (a pass is
// skipped when every key has the same byte there), using tmp (as long as
// a); it returns the sorted slice and the other one.
func radixSort(a, tmp []sortKey) (sorted, spare []sortKey) {
	if len(a) < 2 {
		return a, tmp
	}
	for shift := 0; shift < 64; shift += 8 {
		var count [256]int
		for i := range a {
			count[byte(a[i].prefix>>shift)]++
		}
		if count[byte(a[0].prefix>>shift)] == len(a) {
			continue
		}
		pos := 0
		for d, n := range count {
			count[d] = pos
			pos += n
		}
		for i := range a {
			d := byte(a[i].prefix >> shift)
			tmp[count[d]] = a[i]
			count[d]++
		}
		a, tmp = tmp, a
	}
	return a, tmp
}

// build fills b with the batch, links in id order, and resets g. b's
// slices are reused; their backing arrays, and g's, stay b's until the
// next build.
func (g *aggregate) build(b *shortener.VisitBatch) {
	g.order = g.order[:0]
	for i := range g.entries {
		g.order = append(g.order, sortKey{idPrefix(g.id(&g.entries[i])), int32(i)})
	}
	g.spare = slices.Grow(g.spare[:0], len(g.order))[:len(g.order)]
	g.order, g.spare = radixSort(g.order, g.spare)
	// Ids with the same first 8 bytes: by the rest.
	for i := 0; i < len(g.order); {
		j := i + 1
		for j < len(g.order) && g.order[j].prefix == g.order[i].prefix {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(g.order[i:j], func(x, y sortKey) int {
				return bytes.Compare(g.id(&g.entries[x.entry]), g.id(&g.entries[y.entry]))
			})
		}
		i = j
	}
	ids := string(g.arena)
	b.Keys = append(b.Keys[:0], g.dict.keys...)
	b.Links = slices.Grow(b.Links[:0], len(g.entries))
	g.counts = slices.Grow(g.counts[:0], len(g.pairs))
	pacer := pace.New(pacerPause, pacerNow)
	for i, o := range g.order {
		if i%paceEvery == paceEvery-1 {
			pacer.Step()
		}
		e := &g.entries[o.entry]
		start := len(g.counts)
		for p := e.head; p >= 0; p = g.pairs[p].next {
			g.counts = append(g.counts, shortener.KeyCount{Key: g.pairs[p].key, N: int64(g.pairs[p].n)})
		}
		b.Links = append(b.Links, shortener.LinkVisits{
			ID:    ids[e.idOff : e.idOff+uint32(e.idLen)],
			Total: int64(e.total), Bots: int64(e.bots), Limited: e.limited, CreatedAt: e.created,
			Counts: g.counts[start:len(g.counts):len(g.counts)],
		})
	}
	g.reset()
}

// dict numbers the keys of one batch.
type dict struct {
	keys      []shortener.VisitKey
	days      map[uint32]uint32
	hosts     map[string]uint32
	agentIDs  [MaxAgentID]uint32   // agent ID → key index + 1
	agents    [2]map[string]uint32 // agents without an ID, browsers and bots
	countries map[uint16]uint32
	fixed     [numFixed]uint32 // key index + 1
	lastHost  []byte           // the host looked up last, and its key
	lastHostK uint32
	lastDay   uint32 // the day looked up last + 1, and its key
	lastDayK  uint32

	// kept across batches
	dayNames     map[uint32]string
	countryNames map[uint16]string
}

// Keys every batch may need.
const (
	fixedDirect = iota
	fixedInvalid
	fixedOtherReferrer
	fixedOtherAgent
	fixedOtherCountry
	numFixed
)

var fixedKeys = [numFixed]shortener.VisitKey{
	{Kind: shortener.KindReferrer, Name: shortener.DirectReferrer},
	{Kind: shortener.KindReferrer, Name: InvalidReferrer},
	{Kind: shortener.KindReferrer, Name: shortener.OtherKey},
	{Kind: shortener.KindBrowser, Name: shortener.OtherKey}, // as the store folds agents
	{Kind: shortener.KindCountry, Name: shortener.OtherKey},
}

func newDict() dict {
	return dict{days: map[uint32]uint32{}, hosts: map[string]uint32{}, agents: [2]map[string]uint32{{}, {}},
		countries: map[uint16]uint32{}, dayNames: map[uint32]string{}, countryNames: map[uint16]string{}}
}

func (d *dict) reset() {
	d.keys = d.keys[:0]
	clear(d.days)
	clear(d.hosts)
	clear(d.agentIDs[:])
	clear(d.agents[0])
	clear(d.agents[1])
	clear(d.countries)
	clear(d.fixed[:])
	d.lastHost, d.lastDay = d.lastHost[:0], 0
}

func (d *dict) add(k shortener.VisitKey) uint32 {
	d.keys = append(d.keys, k)
	return uint32(len(d.keys) - 1)
}

func (d *dict) fixedKey(f int) uint32 {
	if d.fixed[f] == 0 {
		d.fixed[f] = d.add(fixedKeys[f]) + 1
	}
	return d.fixed[f] - 1
}

func (d *dict) other(dim int) uint32 {
	switch dim {
	case dimReferrer:
		return d.fixedKey(fixedOtherReferrer)
	case dimAgent:
		return d.fixedKey(fixedOtherAgent)
	default:
		return d.fixedKey(fixedOtherCountry)
	}
}

func (d *dict) day(day uint32) uint32 {
	if d.lastDay == day+1 {
		return d.lastDayK
	}
	k, ok := d.days[day]
	if !ok {
		name, ok := d.dayNames[day]
		if !ok {
			if len(d.dayNames) > 64 {
				clear(d.dayNames)
			}
			name = time.Unix(int64(day)*86400, 0).UTC().Format(shortener.DayFormat)
			d.dayNames[day] = name
		}
		k = d.add(shortener.VisitKey{Kind: shortener.KindDay, Name: name})
		d.days[day] = k
	}
	d.lastDay, d.lastDayK = day+1, k
	return k
}

// referrer returns the key of a referrer host (nil: invalid; empty:
// direct).
func (d *dict) referrer(host []byte) uint32 {
	switch {
	case host == nil:
		return d.fixedKey(fixedInvalid)
	case len(host) == 0:
		return d.fixedKey(fixedDirect)
	case len(d.lastHost) > 0 && string(host) == string(d.lastHost):
		return d.lastHostK
	}
	k, ok := d.hosts[string(host)]
	if !ok {
		k = d.add(shortener.VisitKey{Kind: shortener.KindReferrer, Name: string(host)})
		d.hosts[string(host)] = k
	}
	d.lastHost, d.lastHostK = append(d.lastHost[:0], host...), k
	return k
}

func (d *dict) agent(id byte, bot bool, name []byte) uint32 {
	if id != 0 && d.agentIDs[id] != 0 {
		return d.agentIDs[id] - 1
	}
	b := 0
	kind := shortener.KindBrowser
	if bot {
		b, kind = 1, shortener.KindBot
	}
	k, ok := d.agents[b][string(name)]
	if !ok {
		k = d.add(shortener.VisitKey{Kind: kind, Name: string(name)})
		d.agents[b][string(name)] = k
	}
	if id != 0 {
		d.agentIDs[id] = k + 1
	}
	return k
}

// country returns the key of a two-letter country code.
func (d *dict) country(code uint16) uint32 {
	k, ok := d.countries[code]
	if !ok {
		name, ok := d.countryNames[code]
		if !ok {
			if len(d.countryNames) > 512 {
				clear(d.countryNames)
			}
			name = string([]byte{byte(code >> 8), byte(code)})
			d.countryNames[code] = name
		}
		k = d.add(shortener.VisitKey{Kind: shortener.KindCountry, Name: name})
		d.countries[code] = k
	}
	return k
}

// lookup returns the key index of k, adding it if needed.
func (d *dict) lookup(k shortener.VisitKey) uint32 {
	for f, fk := range fixedKeys {
		if k == fk {
			return d.fixedKey(f)
		}
	}
	switch k.Kind {
	case shortener.KindDay:
		if t, err := time.Parse(shortener.DayFormat, k.Name); err == nil && t.Unix() >= 0 {
			return d.day(uint32(t.Unix() / 86400))
		}
	case shortener.KindReferrer:
		return d.referrer([]byte(k.Name))
	case shortener.KindBrowser:
		return d.agent(0, false, []byte(k.Name))
	case shortener.KindBot:
		return d.agent(0, true, []byte(k.Name))
	case shortener.KindCountry:
		if len(k.Name) == 2 {
			return d.country(uint16(k.Name[0])<<8 | uint16(k.Name[1]))
		}
	}
	for i, have := range d.keys {
		if have == k {
			return uint32(i)
		}
	}
	return d.add(k)
}

// isOther reports whether key is dim's (other) key.
func (d *dict) isOther(dim int, key uint32) bool {
	f := fixedOtherCountry
	switch dim {
	case dimReferrer:
		f = fixedOtherReferrer
	case dimAgent:
		f = fixedOtherAgent
	}
	return d.fixed[f] == key+1
}
