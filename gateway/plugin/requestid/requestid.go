// Package requestid is APISIX's request-id plugin: every request gets an
// id in a header (X-Request-Id) sent upstream and, unless the upstream set
// one, back to the client; a client's own id is kept. Ids are UUIDv4,
// UUIDv7 (3.x), nanoid or snowflake, written into the request's buffer without
// allocating.
package requestid

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "request-id"
	Priority = 11010
)

// Snowflake layout: APISIX's plugin_attr defaults (epoch 2021-01-01,
// 12 data machine bits, 10 sequence bits, 1 ms per tick).
const (
	snowflakeEpoch = 1609459200000
	machineBits    = 12
	sequenceBits   = 10
)

// Factory makes request-id instances; it holds the snowflake state, shared
// by every instance.
type Factory struct {
	machine uint64
	state   atomic.Uint64 // last tick << sequenceBits | sequence
	now     func() time.Time
}

var _ gateway.Factory = (*Factory)(nil)

// New returns the plugin factory. machine is this node's snowflake data
// machine id (12 bits); APISIX leases one from etcd, linkgate takes it from
// the operator (distinct per node, or ids may collide across nodes).
func New(machine uint16) *Factory {
	return &Factory{machine: uint64(machine) & (1<<machineBits - 1), now: time.Now}
}

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"header_name":         {Type: "string", Default: "X-Request-Id"},
	"include_in_response": {Type: "boolean", Default: true},
	"algorithm":           {Type: "string", Enum: []any{"uuid", "snowflake", "nanoid", "uuidv7"}, Default: "uuid"},
}}

// Schema is APISIX 2.14's, with 3.x's uuidv7.
func (*Factory) Schema() *gateway.Schema { return schema }

type algorithm uint8

const (
	uuid algorithm = iota
	snowflake
	nanoid
	uuidv7
)

type instance struct {
	f       *Factory
	header  string
	varName string // http_x_request_id
	alg     algorithm
}

// responding is an instance that also sets the response header.
type responding struct{ *instance }

// New builds an instance.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	c := struct {
		Header    string `json:"header_name"`
		Include   *bool  `json:"include_in_response"`
		Algorithm string `json:"algorithm"`
	}{Header: "X-Request-Id"}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{f: f, header: c.Header, varName: "http_" + strings.ReplaceAll(strings.ToLower(c.Header), "-", "_")}
	switch c.Algorithm {
	case "snowflake":
		in.alg = snowflake
	case "nanoid":
		in.alg = nanoid
	case "uuidv7":
		in.alg = uuidv7
	}
	if c.Include == nil || *c.Include {
		return responding{in}, nil
	}
	return in, nil
}

// Rewrite gives the request an id unless it has one.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	if c.Var(in.varName) != "" {
		return gateway.Reply{}
	}
	var id []byte
	switch in.alg {
	case uuid:
		id = appendUUID(c.Buffer(36)[:0], rand.Uint64(), 4)
	case uuidv7:
		id = appendUUID(c.Buffer(36)[:0], uint64(in.f.now().UnixMilli())<<16|rand.Uint64()&0xffff, 7)
	case nanoid:
		id = appendNanoid(c.Buffer(21)[:0])
	case snowflake:
		id = strconv.AppendUint(c.Buffer(20)[:0], in.f.snowflake(), 10)
	}
	c.SetUpstreamHeader(in.header, unsafe.String(unsafe.SliceData(id), len(id)))
	return gateway.Reply{}
}

// FilterHeaders returns the request's id to the client, unless the
// upstream answered with its own.
func (in responding) FilterHeaders(c gateway.Ctx) {
	if c.ResponseHeader(in.header) == "" {
		c.SetResponseHeader(in.header, c.Var(in.varName))
	}
}

const hexDigits = "0123456789abcdef"

// appendUUID appends a UUID of version v (4: random; 7: hi's top 48
// bits are the Unix time in milliseconds, RFC 9562) whose first 64 bits
// are hi, and random others.
func appendUUID(b []byte, hi uint64, v uint64) []byte {
	lo := rand.Uint64()
	hi = hi&^(0xf<<12) | v<<12   // version
	lo = lo&^(0x3<<62) | 0x2<<62 // variant 10
	var u [36]byte
	hex16(u[0:8], hi>>32, 8)
	u[8] = '-'
	hex16(u[9:13], hi>>16, 4)
	u[13] = '-'
	hex16(u[14:18], hi, 4)
	u[18] = '-'
	hex16(u[19:23], lo>>48, 4)
	u[23] = '-'
	hex16(u[24:36], lo, 12)
	return append(b, u[:]...)
}

// hex16 writes the low n hex digits of v into dst[:n].
func hex16(dst []byte, v uint64, n int) {
	for i := n - 1; i >= 0; i-- {
		dst[i] = hexDigits[v&0xf]
		v >>= 4
	}
}

const nanoidAlphabet = "_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// appendNanoid appends a 21-character nanoid: 126 random bits in the URL-safe alphabet.
func appendNanoid(b []byte) []byte {
	r := rand.Uint64()
	for i := 0; i < 21; i++ {
		if i == 10 {
			r = rand.Uint64()
		}
		b = append(b, nanoidAlphabet[r&63])
		r >>= 6
	}
	return b
}

// snowflake returns the next id: ticks since the epoch, the data machine,
// and a sequence within the tick. Over 1024 ids in a millisecond borrow
// the next one, so ids stay unique and increasing without waiting.
func (f *Factory) snowflake() uint64 {
	tick := uint64(f.now().UnixMilli()-snowflakeEpoch) << sequenceBits
	for {
		old := f.state.Load()
		next := max(tick, old+1)
		if f.state.CompareAndSwap(old, next) {
			t, seq := next>>sequenceBits, next&(1<<sequenceBits-1)
			return t<<(machineBits+sequenceBits) | f.machine<<sequenceBits | seq
		}
	}
}
