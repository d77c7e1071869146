package accesslog

import (
	"strconv"
	"time"
	"unsafe"

	"github.com/linkgate/linkgate/internal/jsonquote"
)

// Append appends e's line, with its newline, to b; times are in loc. It
// does not allocate when b has room.
func (f Format) Append(b []byte, e *Entry, loc *time.Location) []byte {
	if f == JSON {
		return appendJSON(b, e, loc)
	}
	return appendCombined(b, e, loc)
}

// appendCombined writes nginx's combined format.
func appendCombined(b []byte, e *Entry, loc *time.Location) []byte {
	b = appendAddr(b, e, "-")
	b = append(b, " - - ["...)
	b = e.Time.In(loc).AppendFormat(b, "02/Jan/2006:15:04:05 -0700")
	b = append(b, `] "`...)
	if len(e.Method)+len(e.URI)+len(e.Proto) == 0 {
		b = append(b, '-') // nothing of a request line was read
	} else {
		b = appendCLF(b, e.Method)
		b = append(b, ' ')
		b = appendCLF(b, e.URI)
		if len(e.Proto) > 0 {
			b = append(b, ' ')
			b = appendCLF(b, e.Proto)
		}
	}
	b = append(b, `" `...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, ' ')
	if e.Bytes < 0 {
		b = append(b, '-')
	} else {
		b = strconv.AppendInt(b, e.Bytes, 10)
	}
	b = append(b, ` "`...)
	b = appendCLFOrDash(b, e.Referer)
	b = append(b, `" "`...)
	b = appendCLFOrDash(b, e.UA)
	return append(b, "\"\n"...)
}

func appendAddr(b []byte, e *Entry, none string) []byte {
	if !e.Addr.IsValid() {
		return append(b, none...)
	}
	return e.Addr.AppendTo(b)
}

func appendCLFOrDash(b, s []byte) []byte {
	if len(s) == 0 {
		return append(b, '-')
	}
	return appendCLF(b, s)
}

const upperHex = "0123456789ABCDEF"

// appendCLF appends s escaped as nginx's escape=default: '"', '\\' and
// bytes below 0x20 or above 0x7e as \xXX, so a line is one line and its
// quoted fields end at their closing quote.
func appendCLF(b, s []byte) []byte {
	for _, c := range s {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b = append(b, '\\', 'x', upperHex[c>>4], upperHex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}

// appendJSON writes one JSON object.
func appendJSON(b []byte, e *Entry, loc *time.Location) []byte {
	b = append(b, `{"time":"`...)
	b = e.Time.In(loc).AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	b = append(b, `","remote_addr":"`...)
	b = appendAddr(b, e, "")
	b = append(b, `","method":`...)
	b = appendJSONString(b, e.Method)
	b = append(b, `,"uri":`...)
	b = appendJSONString(b, e.URI)
	b = append(b, `,"proto":`...)
	b = appendJSONString(b, e.Proto)
	b = append(b, `,"host":`...)
	b = appendJSONString(b, e.Host)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"bytes":`...)
	if e.Bytes < 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, e.Bytes, 10)
	}
	b = append(b, `,"request_time":`...)
	b = strconv.AppendFloat(b, e.Duration.Seconds(), 'f', 6, 64)
	b = append(b, `,"referer":`...)
	b = appendJSONString(b, e.Referer)
	b = append(b, `,"user_agent":`...)
	b = appendJSONString(b, e.UA)
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string (jsonquote.Append), without
// copying it.
func appendJSONString(b, s []byte) []byte {
	return jsonquote.Append(b, unsafe.String(unsafe.SliceData(s), len(s)))
}
