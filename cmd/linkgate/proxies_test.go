package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An ip-ranges.json in AWS's published format (a few of its entries).
const awsRangesSample = `{
  "syncToken": "1764547200",
  "createDate": "2026-12-01-00-00-00",
  "prefixes": [
    {"ip_prefix": "3.2.34.0/26", "region": "af-south-1", "service": "AMAZON", "network_border_group": "af-south-1"},
    {"ip_prefix": "13.32.0.0/15", "region": "GLOBAL", "service": "CLOUDFRONT", "network_border_group": "GLOBAL"},
    {"ip_prefix": "130.176.0.0/18", "region": "GLOBAL", "service": "CLOUDFRONT_ORIGIN_FACING", "network_border_group": "GLOBAL"},
    {"ip_prefix": "52.94.76.0/22", "region": "us-west-2", "service": "EC2", "network_border_group": "us-west-2"}
  ],
  "ipv6_prefixes": [
    {"ipv6_prefix": "2600:9000::/28", "region": "GLOBAL", "service": "CLOUDFRONT", "network_border_group": "GLOBAL"},
    {"ipv6_prefix": "2600:1f14::/35", "region": "us-west-2", "service": "EC2", "network_border_group": "us-west-2"}
  ]
}`

func TestTrustedProxiesFlag(t *testing.T) {
	ranges := filepath.Join(t.TempDir(), "ip-ranges.json")
	if err := os.WriteFile(ranges, []byte(awsRangesSample), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		list []string
		file string
		n    int
		err  string
	}{
		{nil, "", 0, ""},
		{[]string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32"}, "", 3, ""},
		{[]string{"aws-alb"}, "", 5, ""},
		{[]string{"cloudfront"}, ranges, 3, ""},
		{[]string{"cloudfront", "aws-alb"}, ranges, 8, ""},
		{[]string{"cloudfront"}, "", 0, "needs --aws-ip-ranges"},
		{[]string{"cloudfront"}, filepath.Join(t.TempDir(), "missing.json"), 0, "--aws-ip-ranges"},
		{[]string{"10.0.0.0/33"}, "", 0, "not a CIDR"},
		{[]string{"proxy.example"}, "", 0, "not a CIDR"},
	} {
		p, err := trustedProxies(tt.list, tt.file)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want %q", tt.list, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("%q: %v", tt.list, err)
		case tt.err == "" && p.Len() != tt.n:
			t.Errorf("%q: %d prefixes, want %d", tt.list, p.Len(), tt.n)
		}
	}
	if _, err := parseAWSRanges(strings.NewReader(`{"prefixes":[]}`), "CLOUDFRONT"); err == nil {
		t.Error("a file without CloudFront prefixes was accepted")
	}
	if _, err := parseAWSRanges(strings.NewReader(`<html>`), "CLOUDFRONT"); err == nil {
		t.Error("a file that is not JSON was accepted")
	}
}
