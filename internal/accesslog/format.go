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
	fm := formatter{format: f, loc: loc}
	return fm.append(b, e)
}

// formatter writes lines of one format, keeping the text of the last
// second's time: a log's lines mostly share it, and formatting a time
// costs more than the rest of a line.
type formatter struct {
	format Format
	loc    *time.Location
	valid  bool
	sec    int64  // the Unix second stamp is of
	stamp  []byte // combined: 07/Dec/2026:05:30:55 -0700; JSON: 2026-12-07T05:30:55
	zone   []byte // JSON: -07:00 (or Z)
}

func (f *formatter) append(b []byte, e *Entry) []byte {
	if sec := e.Time.Unix(); !f.valid || sec != f.sec {
		t := e.Time.In(f.loc)
		if f.format == JSON {
			f.stamp = t.AppendFormat(f.stamp[:0], "2006-01-02T15:04:05")
			f.zone = t.AppendFormat(f.zone[:0], "Z07:00")
		} else {
			f.stamp = t.AppendFormat(f.stamp[:0], "02/Jan/2006:15:04:05 -0700")
		}
		f.sec, f.valid = sec, true
	}
	if f.format == JSON {
		return f.appendJSON(b, e)
	}
	return f.appendCombined(b, e)
}

// appendCombined writes nginx's combined format.
func (f *formatter) appendCombined(b []byte, e *Entry) []byte {
	b = appendAddr(b, e, "-")
	b = append(b, " - - ["...)
	b = append(b, f.stamp...)
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

// clfEscaped are the bytes nginx's escape=default writes as \xXX: '"',
// '\\', below 0x20 and above 0x7e.
var clfEscaped = func() (t [256]bool) {
	for c := range t {
		t[c] = c < 0x20 || c > 0x7e || c == '"' || c == '\\'
	}
	return t
}()

// appendCLF appends s escaped as nginx's escape=default, so a line is one
// line and its quoted fields end at their closing quote. Runs of bytes
// that need no escape are copied whole.
func appendCLF(b, s []byte) []byte {
	from := 0
	for i, c := range s {
		if !clfEscaped[c] {
			continue
		}
		b = append(b, s[from:i]...)
		b = append(b, '\\', 'x', upperHex[c>>4], upperHex[c&0xf])
		from = i + 1
	}
	return append(b, s[from:]...)
}

// appendJSON writes one JSON object.
func (f *formatter) appendJSON(b []byte, e *Entry) []byte {
	b = append(b, `{"time":"`...)
	b = append(b, f.stamp...)
	b = append(b, '.')
	us := e.Time.Nanosecond() / 1000
	for d := 100000; d > 0; d /= 10 {
		b = append(b, byte('0'+us/d%10))
	}
	b = append(b, f.zone...)
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
