// Package geoiptest writes small MaxMind-format databases for tests, with
// MaxMind's own writer.
package geoiptest

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// WriteDB writes a database of type dbType (GeoLite2-Country,
// GeoLite2-City, GeoLite2-ASN…) in tb.TempDir() whose networks (CIDRs)
// have the given ISO country codes, laid out as GeoLite2-Country lays out
// its records, and returns its path.
func WriteDB(tb testing.TB, dbType string, nets map[string]string) string {
	tb.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: dbType, RecordSize: 24})
	if err != nil {
		tb.Fatal(err)
	}
	for cidr, cc := range nets {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			tb.Fatal(err)
		}
		rec := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(cc)}}
		if err := tree.Insert(n, rec); err != nil {
			tb.Fatal(err)
		}
	}
	path := filepath.Join(tb.TempDir(), "country.mmdb")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := tree.WriteTo(f); err != nil {
		tb.Fatal(err)
	}
	return path
}
