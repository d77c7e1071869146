package gateway_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/linkgate/linkgate/gateway"
)

type exactInner struct {
	Op string `json:"op"`
}

type exactEmbedded struct {
	Deep int `json:"deep"`
}

type exactConf struct {
	exactEmbedded
	Match    []exactInner          `json:"match"`
	ByName   map[string]exactInner `json:"by_name"`
	Ptr      *exactInner           `json:"ptr"`
	Raw      json.RawMessage       `json:"raw"`
	Untagged string
	Headers  map[string]string `json:"headers"`
}

func TestUnmarshalExactKeys(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     exactConf
	}{
		{"exact keys", `{"match":[{"op":"=="}],"ptr":{"op":"x"},"deep":3}`,
			exactConf{exactEmbedded: exactEmbedded{3}, Match: []exactInner{{"=="}}, Ptr: &exactInner{"x"}}},
		{"a folded key is ignored", `{"mAtCh":[{"op":"=="}]}`, exactConf{}},
		{"an escaped folded key is ignored", `{"M\u0061tch":[{"op":"=="}]}`, exactConf{}},
		{"a Kelvin sign does not fold to k", `{"by_name":{"a":{"op":"x"}},"ptr":{"op":"\u212a"},"deep":1,"dee\u212a":2}`,
			exactConf{exactEmbedded: exactEmbedded{1}, ByName: map[string]exactInner{"a": {"x"}}, Ptr: &exactInner{"\u212a"}}},
		{"in slice elements", `{"match":[{"OP":"=="},{"op":"~~"}]}`, exactConf{Match: []exactInner{{}, {"~~"}}}},
		{"in map values, not map keys", `{"by_name":{"A":{"Op":"x","op":"y"}},"headers":{"X-Id":"1"}}`,
			exactConf{ByName: map[string]exactInner{"A": {"y"}}, Headers: map[string]string{"X-Id": "1"}}},
		{"in embedded structs", `{"DEEP":5}`, exactConf{}},
		{"the exact key wins over a folded one", `{"Match":[{"op":"a"}],"match":[{"op":"b"}]}`, exactConf{Match: []exactInner{{"b"}}}},
		{"untagged fields keep encoding/json's matching", `{"untagged":"u","RAW":1,"raw":{"Op":1}}`,
			exactConf{Untagged: "u", Raw: json.RawMessage(`{"Op":1}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got exactConf
			if err := gateway.Unmarshal([]byte(tc.in), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Unmarshal(%s)\n got %+v\nwant %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestUnmarshalErrors(t *testing.T) {
	for _, in := range []string{`{"match":1}`, `{"Match":[`, `[1]`, `{"match":[]} x`} {
		var c exactConf
		if err := gateway.Unmarshal([]byte(in), &c); err == nil {
			t.Errorf("Unmarshal(%s): no error", in)
		}
	}
}

// A key folding to a tag that is not lower case is dropped too.
func TestUnmarshalUpperCaseTags(t *testing.T) {
	var c struct {
		Index struct {
			N int `json:"modifiedIndex"`
		} `json:"index"`
	}
	if err := gateway.Unmarshal([]byte(`{"index":{"modifiedindex":4}}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Index.N != 0 {
		t.Errorf("modifiedindex filled modifiedIndex: %d", c.Index.N)
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add(`{"match":[{"op":"=="}],"Match":2,"by_name":{"K":{"OP":"x"}}}`)
	f.Fuzz(func(t *testing.T, in string) {
		var exact, loose exactConf
		err := gateway.Unmarshal([]byte(in), &exact)
		// Dropping keys never makes a document undecodable.
		if err != nil && json.Unmarshal([]byte(in), &loose) == nil {
			t.Fatalf("Unmarshal rejected %s, which encoding/json accepts: %v", in, err)
		}
		if err != nil {
			return
		}
		// Re-encoded, what Unmarshal decoded is a fixed point.
		b, _ := json.Marshal(exact)
		var again exactConf
		if err := gateway.Unmarshal(b, &again); err != nil {
			t.Fatalf("%s: %s does not decode: %v", in, b, err)
		}
		if b2, _ := json.Marshal(again); string(b2) != string(b) {
			t.Fatalf("%s: decoded to %s, then to %s", in, b, b2)
		}
	})
}

// A resource's document is decoded as it was checked: a key the route
// schema sees as unknown does not reach the route.
func TestDecodeResourceExactKeys(t *testing.T) {
	doc := map[string]any{"uri": "/a", "Hosts": []any{"evil.example"}, "hosts": []any{"a.example"}, "URIS": []any{"/b"}}
	r, err := gateway.Decode[gateway.Route](doc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Hosts, []string{"a.example"}) || len(r.URIs) != 0 {
		t.Errorf("decoded hosts %q, uris %q", r.Hosts, r.URIs)
	}
}

// BenchmarkUnmarshal compares Unmarshal with encoding/json on a route as
// the admin API stores it, with exact keys only (decoded twice) and with
// a folded key (decoded, re-encoded, decoded).
func BenchmarkUnmarshal(b *testing.B) {
	exact := []byte(`{"uri":"/a/*","hosts":["a.example"],"methods":["GET","POST"],"priority":0,"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:8080":1},"timeout":{"connect":6,"send":6,"read":6}},"plugins":{"limit-count":{"count":10,"time_window":60}}}`)
	folded := []byte(`{"uri":"/a/*","hosts":["a.example"],"methods":["GET","POST"],"priority":0,"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:8080":1},"timeout":{"connect":6,"send":6,"read":6}},"plugins":{"response-rewrite":{"headers":{"X-Served-By":"linkgate"}}},"Priority":1}`)
	for _, doc := range []struct {
		name string
		data []byte
	}{{"exact", exact}, {"folded", folded}} {
		for _, dec := range []struct {
			name      string
			unmarshal func([]byte, any) error
		}{{"encoding-json", json.Unmarshal}, {"Unmarshal", gateway.Unmarshal}} {
			b.Run(doc.name+"/"+dec.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var r gateway.Route
					if err := dec.unmarshal(doc.data, &r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// APISIX 3.x's array nodes may leave the port out: a host:port host gives
// it, else the scheme decides (0). An IPv6 host loses its brackets.
func TestNodesPort(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want gateway.Nodes
	}{
		{`[{"host":"127.0.0.1:1980","weight":1}]`, gateway.Nodes{{Host: "127.0.0.1", Port: 1980, Weight: 1}}},
		{`[{"host":"[::1]:1980","weight":1}]`, gateway.Nodes{{Host: "::1", Port: 1980, Weight: 1}}},
		{`[{"host":"example.com","weight":1}]`, gateway.Nodes{{Host: "example.com", Weight: 1}}},
		{`[{"host":"[::1]","weight":1}]`, gateway.Nodes{{Host: "::1", Weight: 1}}},
		// 3.x t/node/upstream-ipv6.t TEST 5, 9: brackets off; two colons
		// without brackets are an IPv6 address without a port.
		{`[{"host":"[::1]","port":1980,"weight":1}]`, gateway.Nodes{{Host: "::1", Port: 1980, Weight: 1}}},
		{`{"::1:1980":1}`, gateway.Nodes{{Host: "::1:1980", Weight: 1}}},
		{`[{"host":"127.0.0.1","port":80,"weight":1}]`, gateway.Nodes{{Host: "127.0.0.1", Port: 80, Weight: 1}}},
		{`{"127.0.0.1:1980":2}`, gateway.Nodes{{Host: "127.0.0.1", Port: 1980, Weight: 2}}},
	} {
		var got gateway.Nodes
		if err := json.Unmarshal([]byte(tc.in), &got); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
