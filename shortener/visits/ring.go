package visits

import (
	"encoding/binary"
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
// A raw record:
//
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
	recHeader   = 25
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

// appendRecord appends the record of v to buf, which must have room for
// recordSize(v) more bytes.
func appendRecord(buf []byte, v *rawVisit, hostLen byte) []byte {
	n := len(buf)
	b := buf[:n+recordSize(v)]
	binary.LittleEndian.PutUint64(b[n:], v.hash)
	binary.LittleEndian.PutUint64(b[n+8:], uint64(v.created))
	binary.LittleEndian.PutUint32(b[n+16:], v.day)
	b[n+20] = byte(len(v.id))
	b[n+21] = hostLen
	b[n+22] = v.flags
	b[n+23] = v.agentID
	b[n+24] = byte(len(v.agentName))
	p := n + recHeader
	p += copy(b[p:], v.id)
	p += copy(b[p:], v.host)
	p += copy(b[p:], v.agentName)
	copy(b[p:], v.ip)
	return b
}

func recordSize(v *rawVisit) int {
	return recHeader + len(v.id) + len(v.host) + len(v.agentName) + len(v.ip)
}

// nextRecord decodes the record at the start of b into v and returns the
// rest of b. Records are written by appendRecord only, so b is well
// formed.
func nextRecord(b []byte, v *rawVisit) []byte {
	v.hash = binary.LittleEndian.Uint64(b)
	v.created = int64(binary.LittleEndian.Uint64(b[8:]))
	v.day = binary.LittleEndian.Uint32(b[16:])
	idLen, hostLen, agentLen := int(b[20]), int(b[21]), int(b[24])
	v.flags, v.agentID = b[22], b[23]
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
