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
//	u32  day: days since 1970-01-01, UTC
//	u8   id length
//	u8   referrer host length, or hostInvalid
//	u8   flags (flag*)
//	u8   agent ID (Agent.ID, 0: none)
//	u8   agent name length
//	     id, referrer host, agent name, then the client's country (2
//	     letters, when a trusted front end said it) or else its IP address
//	     (4 or 16 bytes, with a GeoIP database only)
const (
	recHeader   = 29
	hostInvalid = 0xff // the Referer header has no usable host
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
	day     uint32
	flags   byte
	agentID byte
	id      []byte
	host    []byte // nil: invalid; empty: direct
	agent   []byte // decoded
	ip      net.IP // nil: none; the country code with flagCountry

	agentName string // encoded
}

// appendRecord appends the record of v, one visit, to buf, which must
// have room for recordSize(v) more bytes.
func appendRecord(buf []byte, v *rawVisit, hostLen byte) []byte {
	n := len(buf)
	b := buf[:n+recordSize(v)]
	binary.LittleEndian.PutUint32(b[n:], 1)
	binary.LittleEndian.PutUint64(b[n+4:], v.hash)
	binary.LittleEndian.PutUint64(b[n+12:], uint64(v.created))
	binary.LittleEndian.PutUint32(b[n+20:], v.day)
	b[n+24] = byte(len(v.id))
	b[n+25] = hostLen
	b[n+26] = v.flags
	b[n+27] = v.agentID
	b[n+28] = byte(len(v.agentName))
	p := n + recHeader
	p += copy(b[p:], v.id)
	p += copy(b[p:], v.host)
	p += copy(b[p:], v.agentName)
	copy(b[p:], v.ip)
	return b
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
	return recHeader + len(v.id) + len(v.host) + len(v.agentName) + len(v.ip)
}

// nextRecord decodes the record at the start of b into v and returns the
// rest of b. Records are written by appendRecord only, so b is well
// formed.
func nextRecord(b []byte, v *rawVisit) []byte {
	v.n = binary.LittleEndian.Uint32(b)
	v.hash = binary.LittleEndian.Uint64(b[4:])
	v.created = int64(binary.LittleEndian.Uint64(b[12:]))
	v.day = binary.LittleEndian.Uint32(b[20:])
	idLen, hostLen, agentLen := int(b[24]), int(b[25]), int(b[28])
	v.flags, v.agentID = b[26], b[27]
	p := recHeader
	v.id = b[p : p+idLen]
	p += idLen
	if hostLen == hostInvalid {
		v.host = nil
	} else {
		v.host = b[p : p+hostLen]
		p += hostLen
	}
	v.agent = b[p : p+agentLen]
	p += agentLen
	switch {
	case v.flags&flagIP4 != 0:
		v.ip = net.IP(b[p : p+4])
		p += 4
	case v.flags&flagIP16 != 0:
		v.ip = net.IP(b[p : p+16])
		p += 16
	case v.flags&flagCountry != 0:
		v.ip = net.IP(b[p : p+2])
		p += 2
	default:
		v.ip = nil
	}
	return b[p:]
}
