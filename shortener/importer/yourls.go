package importer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/linkgate/linkgate/shortener"
)

// yourlsColumns is the yourls_url table's column order (YOURLS's
// install schema), used when an INSERT names no columns.
var yourlsColumns = []string{"keyword", "url", "title", "timestamp", "ip", "clicks"}

// readYOURLSSQL reads the rows of the INSERT INTO yourls_url statements
// of a mysqldump (other tables' statements are skipped).
func readYOURLSSQL(r io.Reader, fn func(Line) error) error {
	b, err := io.ReadAll(io.LimitReader(r, maxDocument))
	if err != nil {
		return err
	}
	p := sqlParser{b: b, lower: bytes.ToLower(b), line: 1}
	for {
		i := p.find("insert into")
		if i < 0 {
			return nil
		}
		p.advance(i + len("insert into"))
		p.space()
		table := p.ident()
		p.space()
		cols := yourlsColumns
		if p.peek() == '(' {
			p.i++
			cols = nil
			for p.space(); p.peek() != ')'; p.space() {
				c := p.ident()
				if c == "" { // the end of the input, or not a name
					return fmt.Errorf("line %d: INSERT INTO %s: want a column name or )", p.line, table)
				}
				cols = append(cols, strings.ToLower(c))
				p.space()
				if p.peek() == ',' {
					p.i++
				}
			}
			p.i++
			p.space()
		}
		if !strings.HasSuffix(strings.ToLower(table), "_url") && !strings.EqualFold(table, "url") {
			continue // another table's rows
		}
		if p.find("values") != 0 {
			return fmt.Errorf("line %d: INSERT INTO %s without VALUES", p.line, table)
		}
		p.advance(len("values"))
		for {
			p.space()
			if p.peek() != '(' {
				return fmt.Errorf("line %d: want a row in parentheses", p.line)
			}
			line := p.line
			vals, err := p.row()
			l := Line{Line: line, Err: err}
			if err == nil {
				l.Rec, l.Err = yourlsRecord(cols, vals)
			}
			if err := fn(l); err != nil {
				return err
			}
			if err != nil {
				return fmt.Errorf("line %d: %w", line, err) // the statement cannot be read on
			}
			p.space()
			if p.peek() == ',' {
				p.i++
				continue
			}
			break
		}
	}
}

func yourlsRecord(cols, vals []string) (shortener.LinkRecord, error) {
	at := map[string]int{}
	for i, c := range cols {
		at[c] = i
	}
	get := func(c string) string {
		if i, ok := at[c]; ok && i < len(vals) {
			return vals[i]
		}
		return ""
	}
	r := shortener.LinkRecord{Link: shortener.Link{ID: get("keyword"), URL: get("url")}}
	var err error
	if r.Link.CreatedAt, err = parseTime(get("timestamp")); err != nil {
		return r, err
	}
	if c := get("clicks"); c != "" {
		if r.Link.Visits, err = strconv.ParseInt(c, 10, 64); err != nil || r.Link.Visits < 0 {
			return r, fmt.Errorf("clicks %q is not a count", c)
		}
	}
	return r, Check(&r.Link)
}

type sqlParser struct {
	b, lower []byte
	i        int
	line     int
}

func (p *sqlParser) advance(n int) {
	for _, c := range p.b[p.i : p.i+n] {
		if c == '\n' {
			p.line++
		}
	}
	p.i += n
}

func (p *sqlParser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *sqlParser) space() {
	for p.i < len(p.b) && strings.IndexByte(" \t\r\n", p.b[p.i]) >= 0 {
		p.advance(1)
	}
}

// ident reads a name, `quoted` or bare.
func (p *sqlParser) ident() string {
	if p.peek() == '`' {
		j := strings.IndexByte(string(p.b[p.i+1:]), '`')
		if j < 0 {
			p.i = len(p.b)
			return ""
		}
		s := string(p.b[p.i+1 : p.i+1+j])
		p.advance(j + 2)
		return s
	}
	start := p.i
	for p.i < len(p.b) && (p.b[p.i] == '_' || p.b[p.i] == '.' || 'a' <= p.b[p.i]|0x20 && p.b[p.i]|0x20 <= 'z' || '0' <= p.b[p.i] && p.b[p.i] <= '9') {
		p.i++
	}
	return string(p.b[start:p.i])
}

// row reads (v, v, …): quoted strings with MySQL's escapes, numbers, NULL.
func (p *sqlParser) row() ([]string, error) {
	p.i++ // (
	var vals []string
	for {
		p.space()
		switch c := p.peek(); {
		case c == '\'':
			p.i++
			var s strings.Builder
			for {
				if p.i >= len(p.b) {
					return nil, errors.New("unterminated string")
				}
				c := p.b[p.i]
				switch {
				case c == '\\' && p.i+1 < len(p.b):
					s.WriteByte(unescape(p.b[p.i+1]))
					p.advance(2)
					continue
				case c == '\'' && p.i+1 < len(p.b) && p.b[p.i+1] == '\'':
					s.WriteByte('\'')
					p.advance(2)
					continue
				case c == '\'':
					p.i++
				default:
					s.WriteByte(c)
					p.advance(1)
					continue
				}
				break
			}
			vals = append(vals, s.String())
		default:
			start := p.i
			for p.i < len(p.b) && p.b[p.i] != ',' && p.b[p.i] != ')' {
				p.advance(1)
			}
			v := strings.TrimSpace(string(p.b[start:p.i]))
			if strings.EqualFold(v, "null") {
				v = ""
			}
			vals = append(vals, v)
		}
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case ')':
			p.i++
			return vals, nil
		default:
			return nil, fmt.Errorf("unexpected %q in a row", p.peek())
		}
	}
}

// unescape is MySQL's backslash escape of c.
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case '0':
		return 0
	case 'Z':
		return 26
	}
	return c
}

// find returns the offset of the keyword s (lower case) from p.i on in
// the dump, case folded, or -1.
func (p *sqlParser) find(s string) int {
	return bytes.Index(p.lower[p.i:], []byte(s))
}
