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

// Nothing is bounded per link or per batch but the links (Config.MaxLinks)
// and the pairs (maxPairsPerLink per link on average): every value of
// every dimension is counted under its own key, so a report's "(other)"
// is only ever the tail beyond its top N over the range asked for.

// Dimensions of a visit, each counted under one key per visit: the
// entry remembers the pair it counted last in each, which is the one
// a hot link's next visit usually needs.
const (
	dimHour = iota
	dimReferrer
	dimAgent
	dimOS
	dimDevice
	dimCountry
	dimUTM  // utm_source; utm_medium and utm_campaign follow
	numDims = dimUTM + 3
)

// maxPairsPerLink bounds the pairs of a batch: MaxLinks times this many.
// Beyond it, visits are dropped (and counted), as beyond MaxLinks.
const maxPairsPerLink = 64

// entry is one link's visits in the batch.
type entry struct {
	hash    uint64
	idOff   uint32 // id in the arena
	total   uint32
	bots    uint32
	head    int32          // this link's first pair, -1: none
	pairs   uint32         // how many pairs it has
	last    [numDims]int32 // per dimension, the pair counted last
	created int64          // the link's CreatedAt, Unix seconds: the latest seen
	idLen   uint8
	limited bool
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
	pairIx  map[uint64]int32 // entry index << 32 | key → pair
	dict    dict
	order   []sortKey // batch building
	spare   []sortKey // radix sort's other half
	counts  []shortener.KeyCount
}

func newAggregate(seed maphash.Seed) *aggregate {
	return &aggregate{seed: seed, slots: make([]int32, 1024), dict: newDict(), pairIx: map[uint64]int32{}}
}

func (g *aggregate) links() int { return len(g.entries) }

// find returns the index of the entry of id, or -1.
func (g *aggregate) find(h uint64, id []byte) int32 {
	mask := uint64(len(g.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := g.slots[i]
		if s == 0 {
			return -1
		}
		if e := &g.entries[s-1]; e.hash == h && string(g.arena[e.idOff:e.idOff+uint32(e.idLen)]) == string(id) {
			return s - 1
		}
	}
}

// insert adds an entry for id, which must not be present, and returns its
// index.
func (g *aggregate) insert(h uint64, id []byte) int32 {
	if 2*(len(g.entries)+1) > len(g.slots) {
		g.grow()
	}
	e := entry{hash: h, idOff: uint32(len(g.arena)), idLen: uint8(len(id)), head: -1}
	for d := range e.last {
		e.last[d] = -1
	}
	g.entries = append(g.entries, e)
	g.arena = append(g.arena, id...)
	g.place(h, int32(len(g.entries)))
	return int32(len(g.entries) - 1)
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

// chainWalk is how many pairs a link has before they are found through
// pairIx: a shorter chain is walked, which costs less than the map (a
// visit of a link not yet in the batch looked up and inserted a map entry
// per dimension: over a million links, where nearly every visit is such a
// link, the map was most of a drain's time).
const chainWalk = 16

// count adds n visits of entry ei under key, in dimension dim.
func (g *aggregate) count(ei int32, dim int, key uint32, n uint32) {
	e := &g.entries[ei]
	if p := e.last[dim]; p >= 0 && g.pairs[p].key == key {
		g.pairs[p].n += n
		return
	}
	k := uint64(ei)<<32 | uint64(key)
	if e.pairs <= chainWalk {
		for p := e.head; p >= 0; p = g.pairs[p].next {
			if g.pairs[p].key == key {
				g.pairs[p].n += n
				e.last[dim] = p
				return
			}
		}
	} else if p, ok := g.pairIx[k]; ok {
		g.pairs[p].n += n
		e.last[dim] = p
		return
	}
	g.pairs = append(g.pairs, pair{key: key, n: n, next: e.head})
	e.head = int32(len(g.pairs) - 1)
	e.last[dim] = e.head
	e.pairs++
	switch {
	case e.pairs == chainWalk+1: // from now on through the map
		for p := e.head; p >= 0; p = g.pairs[p].next {
			g.pairIx[uint64(ei)<<32|uint64(g.pairs[p].key)] = p
		}
	case e.pairs > chainWalk+1:
		g.pairIx[k] = e.head
	}
}

// reset empties g for the next batch, keeping its memory.
func (g *aggregate) reset() {
	clear(g.slots)
	g.entries = g.entries[:0]
	g.arena = g.arena[:0]
	g.pairs = g.pairs[:0]
	clear(g.pairIx)
	g.dict.reset()
}

// stats returns e's visits as lifetime statistics (VisitStats).
func (g *aggregate) stats(e *entry) shortener.VisitStats {
	st := shortener.VisitStats{Total: int64(e.total), Bots: int64(e.bots)}
	for p := e.head; p >= 0; p = g.pairs[p].next {
		k := g.dict.keys[g.pairs[p].key]
		name := k.Name
		switch {
		case k.Kind == shortener.KindHour:
			k.Kind, name = shortener.KindDay, time.Unix(int64(k.Hour)*3600, 0).UTC().Format(shortener.DayFormat)
		case k.Kind >= shortener.NumVisitKinds:
			continue
		}
		bd := st.Breakdown(k.Kind)
		if *bd == nil {
			*bd = shortener.Breakdown{}
		}
		(*bd)[name] += int64(g.pairs[p].n)
	}
	return st
}

// rangeCounts adds e's visits within q's range to c.
func (g *aggregate) rangeCounts(e *entry, q *shortener.StatsQuery, c *shortener.VisitCounts) {
	step := q.Granularity.Step()
	for p := e.head; p >= 0; p = g.pairs[p].next {
		k := g.dict.keys[g.pairs[p].key]
		t := time.Unix(int64(k.Hour)*3600, 0)
		if t.Before(q.From) || !t.Before(q.To) {
			continue
		}
		n := shortener.PeopleBots{People: int64(g.pairs[p].n)}
		if k.Bot {
			n = shortener.PeopleBots{Bots: int64(g.pairs[p].n)}
		}
		if k.Kind == shortener.KindHour {
			c.Series[int(t.Sub(q.From)/step)].Add(n)
			continue
		}
		if d, ok := shortener.KindDimension(k.Kind); ok {
			v := c.Dims[d][k.Name]
			v.Add(n)
			c.Dims[d][k.Name] = v
		}
	}
}

// addBatch adds the links of b (a batch the store refused) to g.
func (g *aggregate) addBatch(b *shortener.VisitBatch) {
	keys := make([]uint32, len(b.Keys))
	for i, k := range b.Keys {
		keys[i] = g.dict.lookup(k)
	}
	for i := range b.Links {
		l := &b.Links[i]
		id := []byte(l.ID)
		h := maphash.Bytes(g.seed, id)
		ei := g.find(h, id)
		if ei < 0 {
			ei = g.insert(h, id)
		}
		e := &g.entries[ei]
		e.total += uint32(l.Total)
		e.bots += uint32(l.Bots)
		e.limited = e.limited || l.Limited
		e.created = max(e.created, l.CreatedAt)
		for _, c := range l.Counts {
			g.count(ei, kindDim(b.Keys[c.Key]), keys[c.Key], uint32(c.N))
		}
	}
}

// kindDim is the dimension a key's counts are remembered under.
func kindDim(k shortener.VisitKey) int {
	switch k.Kind {
	case shortener.KindReferrer:
		return dimReferrer
	case shortener.KindBrowser, shortener.KindBot:
		return dimAgent
	case shortener.KindOS:
		return dimOS
	case shortener.KindDevice:
		return dimDevice
	case shortener.KindCountry:
		return dimCountry
	case shortener.KindUTMSource:
		return dimUTM
	case shortener.KindUTMMedium:
		return dimUTM + 1
	case shortener.KindUTMCampaign:
		return dimUTM + 2
	}
	return dimHour
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

// dict numbers the keys of one batch: a key is a kind, a name, an hour
// and whether bots were counted; names are numbered per kind first.
type dict struct {
	keys     []shortener.VisitKey
	index    map[uint64]uint32 // packed (kind, bot, hour, name) → key index
	names    [shortener.NumKinds]map[string]uint32
	nameStr  []string
	agentIDs [MaxAgentID][3]uint32 // agent ID → its name, OS and device names + 1
	hosts    struct {
		last []byte // the host looked up last, and its name + 1
		name uint32
	}
	countries map[uint16]uint32 // code → name + 1
	fixed     [numFixed]uint32  // name + 1

	// kept across batches
	countryNames map[uint16]string
}

// Names every batch may need.
const (
	fixedHour = iota // the hour kind's name, ""
	fixedDirect
	fixedInvalid
	fixedUnknownOS
	fixedUTMInvalid // KindUTMSource's; the others' are looked up
	numFixed
)

var fixedNames = [numFixed]struct {
	kind shortener.VisitKind
	name string
}{
	{shortener.KindHour, ""},
	{shortener.KindReferrer, shortener.DirectReferrer},
	{shortener.KindReferrer, InvalidReferrer},
	{shortener.KindOS, shortener.UnknownKey},
	{shortener.KindUTMSource, InvalidUTM},
}

func newDict() dict {
	d := dict{index: map[uint64]uint32{}, countries: map[uint16]uint32{}, countryNames: map[uint16]string{}}
	for k := range d.names {
		d.names[k] = map[string]uint32{}
	}
	return d
}

func (d *dict) reset() {
	d.keys = d.keys[:0]
	clear(d.index)
	for k := range d.names {
		clear(d.names[k])
	}
	clear(d.nameStr)
	d.nameStr = d.nameStr[:0]
	clear(d.agentIDs[:])
	d.hosts.last, d.hosts.name = d.hosts.last[:0], 0
	clear(d.countries)
	clear(d.fixed[:])
}

// name returns the number of a name of kind.
func (d *dict) name(kind shortener.VisitKind, name []byte) uint32 {
	m := d.names[kind]
	if n, ok := m[string(name)]; ok {
		return n
	}
	n := uint32(len(d.nameStr))
	s := string(name)
	d.nameStr = append(d.nameStr, s)
	m[s] = n
	return n
}

func (d *dict) fixedName(f int) uint32 {
	if d.fixed[f] == 0 {
		d.fixed[f] = d.name(fixedNames[f].kind, []byte(fixedNames[f].name)) + 1
	}
	return d.fixed[f] - 1
}

// key returns the index of the key (kind, name, hour, bot).
func (d *dict) key(kind shortener.VisitKind, name uint32, hour uint32, bot bool) uint32 {
	packed := uint64(kind)<<58 | uint64(hour)<<25 | uint64(name)
	if bot {
		packed |= 1 << 57
	}
	if k, ok := d.index[packed]; ok {
		return k
	}
	k := uint32(len(d.keys))
	d.keys = append(d.keys, shortener.VisitKey{Kind: kind, Name: d.nameStr[name], Hour: int32(hour), Bot: bot})
	d.index[packed] = k
	return k
}

// referrer returns the name of a referrer host (nil: invalid; empty:
// direct).
func (d *dict) referrer(host []byte) uint32 {
	switch {
	case host == nil:
		return d.fixedName(fixedInvalid)
	case len(host) == 0:
		return d.fixedName(fixedDirect)
	case d.hosts.name != 0 && string(host) == string(d.hosts.last):
		return d.hosts.name - 1
	}
	n := d.name(shortener.KindReferrer, host)
	d.hosts.last, d.hosts.name = append(d.hosts.last[:0], host...), n+1
	return n
}

// agent returns the names of an agent, its OS and its device.
func (d *dict) agent(v *rawVisit) (agent, os, device uint32) {
	if v.agentID != 0 && d.agentIDs[v.agentID][0] != 0 {
		n := &d.agentIDs[v.agentID]
		return n[0] - 1, n[1] - 1, n[2] - 1
	}
	bot := v.flags&flagBot != 0
	kind := shortener.KindBrowser
	if bot {
		kind = shortener.KindBot
	}
	agent = d.name(kind, v.agent)
	if len(v.os) == 0 {
		os = d.fixedName(fixedUnknownOS)
	} else {
		os = d.name(shortener.KindOS, v.os)
	}
	dev := v.device
	if len(dev) == 0 {
		dev = deviceDesktop
		if bot {
			dev = deviceBot
		}
	}
	device = d.name(shortener.KindDevice, dev)
	if v.agentID != 0 {
		d.agentIDs[v.agentID] = [3]uint32{agent + 1, os + 1, device + 1}
	}
	return agent, os, device
}

var (
	deviceDesktop = []byte(shortener.DeviceDesktop)
	deviceBot     = []byte(shortener.DeviceBot)
)

// country returns the name of a two-letter country code.
func (d *dict) country(code uint16) uint32 {
	if n := d.countries[code]; n != 0 {
		return n - 1
	}
	name, ok := d.countryNames[code]
	if !ok {
		if len(d.countryNames) > 512 {
			clear(d.countryNames)
		}
		name = string([]byte{byte(code >> 8), byte(code)})
		d.countryNames[code] = name
	}
	n := d.name(shortener.KindCountry, []byte(name))
	d.countries[code] = n + 1
	return n
}

// utm returns the name of a UTM value of parameter i (utmInvalidValue:
// invalid).
func (d *dict) utm(i int, v []byte) uint32 {
	kind := shortener.KindUTMSource + shortener.VisitKind(i)
	if len(v) == 0 {
		if i == 0 {
			return d.fixedName(fixedUTMInvalid)
		}
		return d.name(kind, []byte(InvalidUTM))
	}
	return d.name(kind, v)
}

// lookup returns the key index of k, adding it if needed.
func (d *dict) lookup(k shortener.VisitKey) uint32 {
	return d.key(k.Kind, d.name(k.Kind, []byte(k.Name)), uint32(k.Hour), k.Bot)
}
