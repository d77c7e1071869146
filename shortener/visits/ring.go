package visits

import (
	"encoding/binary"
	"math"
	"net"
)

// The redirect path only appends a compact raw record of the visit to a
// buffer, behind a mutex held for a copy of a few dozen bytes. The drainer
// swaps the buffer for an empty one a few milliseconds later and
// aggregates its records (aggregate.go), in the order they arrived; a
// full buffer drops the visit and counts it. (One buffer keeps that
// order, which decides the links kept when too many are pending; at a
// few dozen nanoseconds a hold, it is far from contended at the request
// rates of a machine.)
//
// A visit the same as the one recorded last (a hot link followed by the
// same kind of client) is not appended: the last record counts it. So
// one hot link costs the drainer one record per drain, not one per visit.
//
// A raw record:
//
//	u32  how many visits it counts (1, or more for repeats)
//	u64  hash of the id (the aggregate's key)
//	i64  the link's CreatedAt, Unix seconds (0: unknown)
//	u32  hour: hours since 1970-01-01, UTC
//	u8   id length
//	u8   referrer host length, or hostInvalid
//	u8   flags (flag*)
//	u16  agent ID (Agent.ID, 0: none)
//	u8   agent name length, OS length, device length
//	u8   utm_source, utm_medium, utm_campaign lengths (0: absent,
//	     utmInvalid: unusable)
//	     id, referrer host, agent name, OS, device, the UTM values, then
//	     the client's country (2 letters, when a trusted front end said
//	     it) or else its IP address (4 or 16 bytes, with a GeoIP database
//	     only)
const (
	recHeader   = 36
	hostInvalid = 0xff // the Referer header has no usable host
	utmInvalid  = 0xff // a UTM value too long or not printable
)

// Flags of a raw record.
const (
	flagLimited = 1 << iota // the link has a visit limit
	flagBot                 // the agent is a bot
	flagIP4                 // a 4-byte address follows
	flagIP16                // a 16-byte address follows
	flagCountry             // a 2-letter country code follows
)

// maxIDLength bounds the ids Record accepts (shortener.MaxIDLength is
// smaller).
const maxIDLength = 255

// rawVisit is a decoded raw record; its slices alias the buffer.
type rawVisit struct {
	n       uint32 // visits (decoded)
	hash    uint64
	created int64
	hour    uint32
	flags   byte
	agentID uint16
	id      []byte
	host    []byte // nil: invalid; empty: direct
	agent   []byte // decoded
	os      []byte
	device  []byte
	utm     [3][]byte // nil: absent; utmInvalidValue: unusable
	ip      net.IP    // nil: none; the country code with flagCountry

	agentName, osName, deviceName string // encoded
}

// appendRecord appends the record of v, one visit, to buf, which must
// have room for recordSize(v) more bytes.
func appendRecord(buf []byte, v *rawVisit, hostLen byte) []byte {
	n := len(buf)
	b := buf[:n+recordSize(v)]
	binary.LittleEndian.PutUint32(b[n:], 1)
	binary.LittleEndian.PutUint64(b[n+4:], v.hash)
	binary.LittleEndian.PutUint64(b[n+12:], uint64(v.created))
	binary.LittleEndian.PutUint32(b[n+20:], v.hour)
	b[n+24] = byte(len(v.id))
	b[n+25] = hostLen
	b[n+26] = v.flags
	binary.LittleEndian.PutUint16(b[n+27:], v.agentID)
	b[n+29] = byte(len(v.agentName))
	b[n+30] = byte(len(v.osName))
	b[n+31] = byte(len(v.deviceName))
	for i, u := range v.utm {
		b[n+32+i] = utmLen(u)
	}
	b[n+35] = 0
	p := n + recHeader
	p += copy(b[p:], v.id)
	p += copy(b[p:], v.host)
	p += copy(b[p:], v.agentName)
	p += copy(b[p:], v.osName)
	p += copy(b[p:], v.deviceName)
	for _, u := range v.utm {
		if utmLen(u) != utmInvalid {
			p += copy(b[p:], u)
		}
	}
	copy(b[p:], v.ip)
	return b
}

// utmInvalidValue marks an unusable UTM value in rawVisit.utm.
var utmInvalidValue = []byte{}

func utmLen(u []byte) byte {
	if u != nil && len(u) == 0 {
		return utmInvalid
	}
	return byte(len(u))
}

// repeat adds the visit of rec, a record appendRecord just wrote, to
// last, the record before it, if both are the same visit; it reports
// whether it did (then rec is not needed).
func repeat(last, rec []byte) bool {
	if len(last) != len(rec) || string(last[4:]) != string(rec[4:]) {
		return false
	}
	n := binary.LittleEndian.Uint32(last)
	if n == math.MaxUint32 {
		return false
	}
	binary.LittleEndian.PutUint32(last, n+1)
	return true
}

func recordSize(v *rawVisit) int {
	n := recHeader + len(v.id) + len(v.host) + len(v.agentName) + len(v.osName) + len(v.deviceName) + len(v.ip)
	for _, u := range v.utm {
		n += len(u)
	}
	return n
}

// nextRecord decodes the record at the start of b into v and returns the
// rest of b. Records are written by appendRecord only, so b is well
// formed.
func nextRecord(b []byte, v *rawVisit) []byte {
	v.n = binary.LittleEndian.Uint32(b)
	v.hash = binary.LittleEndian.Uint64(b[4:])
	v.created = int64(binary.LittleEndian.Uint64(b[12:]))
	v.hour = binary.LittleEndian.Uint32(b[20:])
	idLen, hostLen := int(b[24]), int(b[25])
	v.flags, v.agentID = b[26], binary.LittleEndian.Uint16(b[27:])
	p := recHeader
	take := func(n int) []byte {
		s := b[p : p+n]
		p += n
		return s
	}
	v.id = take(idLen)
	if hostLen == hostInvalid {
		v.host = nil
	} else {
		v.host = take(hostLen)
	}
	v.agent = take(int(b[29]))
	v.os = take(int(b[30]))
	v.device = take(int(b[31]))
	for i := range v.utm {
		switch l := b[32+i]; l {
		case 0:
			v.utm[i] = nil
		case utmInvalid:
			v.utm[i] = utmInvalidValue
		default:
			v.utm[i] = take(int(l))
		}
	}
	switch {
	case v.flags&flagIP4 != 0:
		v.ip = net.IP(take(4))
	case v.flags&flagIP16 != 0:
		v.ip = net.IP(take(16))
	case v.flags&flagCountry != 0:
		v.ip = net.IP(take(2))
	default:
		v.ip = nil
	}
	return b[p:]
}
