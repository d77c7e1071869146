// Package geoip maps client addresses to countries for visit statistics,
// from a local MaxMind-format database (GeoLite2-Country, GeoIP2-Country or
// -City, DB-IP's lite MMDB files…) read with
// github.com/oschwald/maxminddb-golang. Nothing is downloaded: the operator
// supplies the file (linkgate serve --geoip FILE).
package geoip

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/oschwald/maxminddb-golang/v2"

	"github.com/linkgate/linkgate/shortener/visits"
)

var _ visits.Geo = (*DB)(nil)

// DB is an open database. It is safe for concurrent use.
type DB struct {
	r *maxminddb.Reader
}

// Open memory-maps the database at path; it must be a Country or City
// database (its metadata says which).
func Open(path string) (*DB, error) {
	r, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open GeoIP database %s: %w", path, err)
	}
	if t := strings.ToLower(r.Metadata.DatabaseType); !strings.Contains(t, "country") && !strings.Contains(t, "city") {
		r.Close()
		return nil, fmt.Errorf("GeoIP database %s is of type %q: use a Country or City database", path, r.Metadata.DatabaseType)
	}
	return &DB{r: r}, nil
}

type record struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
}

// Country returns the ISO 3166-1 code of the country ip is registered in,
// or "" when the database does not know it.
func (d *DB) Country(ip net.IP) string {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return ""
	}
	var rec record
	if err := d.r.Lookup(a.Unmap()).Decode(&rec); err != nil {
		return ""
	}
	return rec.Country.ISOCode
}

// Close unmaps the database.
func (d *DB) Close() error { return d.r.Close() }
