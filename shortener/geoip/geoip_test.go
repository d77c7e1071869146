package geoip_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/linkgate/linkgate/shortener/geoip"
	"github.com/linkgate/linkgate/shortener/geoip/geoiptest"
)

func TestCountry(t *testing.T) {
	db, err := geoip.Open(geoiptest.WriteDB(t, "GeoLite2-Country", map[string]string{"81.2.69.0/24": "GB", "2a02:ff00::/32": "IT", "89.160.20.0/24": "SE"}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tests := []struct{ ip, want string }{
		{"81.2.69.142", "GB"},
		{"89.160.20.112", "SE"},
		{"::ffff:81.2.69.1", "GB"},
		{"2a02:ff00::1", "IT"},
		{"127.0.0.1", ""},
		{"192.0.2.1", ""},
	}
	for _, tt := range tests {
		if got := db.Country(net.ParseIP(tt.ip)); got != tt.want {
			t.Errorf("Country(%s) = %q, want %q", tt.ip, got, tt.want)
		}
	}
	if got := db.Country(nil); got != "" {
		t.Errorf("Country(nil) = %q", got)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := geoip.Open(filepath.Join(t.TempDir(), "missing.mmdb")); err == nil {
		t.Error("opened a missing file")
	}
	bad := filepath.Join(t.TempDir(), "bad.mmdb")
	os.WriteFile(bad, []byte("not a database"), 0o600)
	if _, err := geoip.Open(bad); err == nil {
		t.Error("opened a file that is not a database")
	}
	if _, err := geoip.Open(geoiptest.WriteDB(t, "GeoLite2-ASN", map[string]string{"81.2.69.0/24": "GB"})); err == nil {
		t.Error("opened an ASN database as a country database")
	}
}
