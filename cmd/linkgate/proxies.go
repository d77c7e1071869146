package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/linkgate/linkgate/shortener/httpapi"
)

// Presets of --trusted-proxies.
const (
	// presetALB: an Application Load Balancer reaches its targets from its
	// own network interfaces in the VPC, whose addresses are private; AWS
	// publishes no list of them (they are the VPC's). Narrow it to the
	// VPC's CIDR where anything else private can reach the instance.
	presetALB = "aws-alb"
	// presetCloudFront: CloudFront's edge and origin-facing prefixes
	// (services CLOUDFRONT and CLOUDFRONT_ORIGIN_FACING) from AWS's
	// ip-ranges.json, which the user downloads and names with
	// --aws-ip-ranges: nothing is fetched at run time.
	presetCloudFront = "cloudfront"
)

// privateRanges are the addresses an ALB node can have inside a VPC.
var privateRanges = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"}

// trustedProxies turns --trusted-proxies (CIDRs, addresses and presets)
// and --aws-ip-ranges into the handler's policy; nil when there are none.
func trustedProxies(list []string, awsRanges string) (*httpapi.TrustedProxies, error) {
	var prefixes []netip.Prefix
	for _, item := range list {
		switch item = strings.TrimSpace(item); item {
		case "":
		case presetALB:
			for _, r := range privateRanges {
				prefixes = append(prefixes, netip.MustParsePrefix(r))
			}
		case presetCloudFront:
			if awsRanges == "" {
				return nil, fmt.Errorf("--trusted-proxies %s needs --aws-ip-ranges FILE: AWS's ip-ranges.json, downloaded beforehand (nothing is fetched)", presetCloudFront)
			}
			f, err := os.Open(awsRanges)
			if err != nil {
				return nil, fmt.Errorf("--aws-ip-ranges: %w", err)
			}
			cf, err := parseAWSRanges(f, "CLOUDFRONT", "CLOUDFRONT_ORIGIN_FACING")
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("--aws-ip-ranges %s: %w", awsRanges, err)
			}
			prefixes = append(prefixes, cf...)
		default:
			p, err := netip.ParsePrefix(item)
			if err != nil {
				a, aerr := netip.ParseAddr(item)
				if aerr != nil {
					return nil, fmt.Errorf("--trusted-proxies: %q is not a CIDR, an address, %s or %s", item, presetALB, presetCloudFront)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			prefixes = append(prefixes, p)
		}
	}
	if len(prefixes) == 0 {
		return nil, nil
	}
	return httpapi.NewTrustedProxies(prefixes), nil
}

// parseAWSRanges reads AWS's ip-ranges.json and returns the IPv4 and IPv6
// prefixes of the given services.
func parseAWSRanges(r io.Reader, services ...string) ([]netip.Prefix, error) {
	var doc struct {
		SyncToken string `json:"syncToken"`
		Prefixes  []struct {
			IPPrefix string `json:"ip_prefix"`
			Service  string `json:"service"`
		} `json:"prefixes"`
		IPv6Prefixes []struct {
			IPv6Prefix string `json:"ipv6_prefix"`
			Service    string `json:"service"`
		} `json:"ipv6_prefixes"`
	}
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("not AWS's ip-ranges.json: %w", err)
	}
	want := map[string]bool{}
	for _, s := range services {
		want[s] = true
	}
	var out []netip.Prefix
	add := func(s, service string) error {
		if !want[service] {
			return nil
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("prefix %q: %w", s, err)
		}
		out = append(out, p)
		return nil
	}
	for _, p := range doc.Prefixes {
		if err := add(p.IPPrefix, p.Service); err != nil {
			return nil, err
		}
	}
	for _, p := range doc.IPv6Prefixes {
		if err := add(p.IPv6Prefix, p.Service); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no prefixes of %s in it", strings.Join(services, ", "))
	}
	return out, nil
}
