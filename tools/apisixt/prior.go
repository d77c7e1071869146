package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// reusePrior replaces drafted cases by the checked port of the same TEST
// block at an earlier tag (prior: its case file,
// priorSrc: its .t file), when the two blocks say the same thing once the
// admin API's envelopes are set aside (normalize). With v3 the reused
// case's expectations are rewritten to the v3 envelopes (rewriteV3). It
// returns the new YAML and how many cases it reused.
func reusePrior(draftYAML []byte, src, priorSrc string, prior []byte, v3 bool) ([]byte, int, error) {
	var doc, old yaml.Node
	if err := yaml.Unmarshal(draftYAML, &doc); err != nil {
		return nil, 0, err
	}
	if err := yaml.Unmarshal(prior, &old); err != nil {
		return nil, 0, err
	}
	oldCases := map[int]*yaml.Node{}
	if len(old.Content) > 0 && field(old.Content[0], "skip") == nil { // a skipped file's cases were never checked
		for _, c := range field(old.Content[0], "cases").Content {
			n, _ := strconv.Atoi(field(c, "test").Value)
			oldCases[n] = c
		}
	}
	byTitle := map[string]block{}
	priorTitles, titles := map[string]int{}, map[string]int{}
	for _, b := range parse(priorSrc) {
		byTitle[b.title] = b
		priorTitles[b.title]++
	}
	for _, b := range parse(src) {
		titles[b.title]++
	}
	now := map[int]block{}
	for _, b := range parse(src) {
		now[b.n] = b
	}
	reused := 0
	cases := field(doc.Content[0], "cases")
	for i, c := range cases.Content {
		n, _ := strconv.Atoi(field(c, "test").Value)
		b := now[n]
		pb, ok := byTitle[b.title]
		if !ok || oldCases[pb.n] == nil || normalize(pb) != normalize(b) {
			if v3 {
				rewriteV3(c) // the drafter reads etcd.get's node.value as the admin GET's
			}
			if ok && oldCases[pb.n] != nil && titles[b.title] == 1 && priorTitles[b.title] == 1 {
				inheritSkip(c, oldCases[pb.n])
			}
			continue
		}
		oc := copyNode(oldCases[pb.n])
		if v3 {
			rewriteV3(oc)
		}
		field(oc, "test").Value = strconv.Itoa(n)
		cases.Content[i] = oc
		reused++
	}
	if reused > 0 {
		inheritFileFields(doc.Content[0], old.Content[0])
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), reused, nil // the head comment survives in doc
}

func field(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

var (
	spaceRE    = regexp.MustCompile(`\s+`)
	envelopeRE = regexp.MustCompile(`"node":\{|"action":"\w+",?|,nil,\[\[\{"action":"delete"\}\]\]|\.node\b|[{},]`)
	sslRE      = regexp.MustCompile(`(admin/ssl|apisix/ssl|'/ssl)\b`)
	logSecs    = []string{"no_error_log", "error_log", "error_log eval", "no_error_log eval"}
)

// normalize is a block's text with what APISIX 3.0 changed in every admin
// test set aside: the "node" wrapper and "action" of answers, res.node.*,
// and the error-log checks linkgate's cases never port.
func normalize(b block) string {
	var sb strings.Builder
	for _, name := range b.order {
		if slicesContains(logSecs, name) {
			continue
		}
		sb.WriteString("--- " + name + "\n" + b.secs[name])
	}
	t := spaceRE.ReplaceAllString(sb.String(), "")
	t = sslRE.ReplaceAllString(t, "${1}s")
	return envelopeRE.ReplaceAllString(t, "")
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// rewriteV3 rewrites a checked case's expectations of admin answers from
// the v2 envelopes ({"action", "node": {"key", "value"}}, lists as
// node.nodes with count) to v3's ({"key", "value"}, lists as list with
// total).
func rewriteV3(c *yaml.Node) {
	steps := field(c, "steps")
	if steps == nil {
		return
	}
	for _, s := range steps.Content {
		if r := field(s, "req"); r != nil {
			r.Value = ssls(r.Value)
		}
		if cp := field(s, "capture"); cp != nil {
			for i := 1; i < len(cp.Content); i += 2 {
				cp.Content[i].Value = v3Path(cp.Content[i].Value)
			}
		}
		w := field(s, "want")
		if w == nil {
			continue
		}
		for _, k := range []string{"json", "json_eq"} {
			n := field(w, k)
			if n == nil {
				continue
			}
			var v any
			if n.Kind == yaml.ScalarNode {
				if json.Unmarshal([]byte(n.Value), &v) != nil {
					// ${captured} numbers: the drafter's {"node":{"value":{…}}} pattern
					if t, ok := strings.CutPrefix(n.Value, `{"node":`); ok {
						n.Value = strings.TrimSuffix(t, "}")
					}
					continue
				}
			} else if n.Decode(&v) != nil {
				continue
			}
			b, _ := json.Marshal(v3Envelope(v))
			*n = *literal(ssls(string(b)))
		}
		for _, k := range []string{"has", "ignore"} {
			if n := field(w, k); n != nil {
				var keep []*yaml.Node
				for _, p := range n.Content {
					if p.Value = v3Path(p.Value); p.Value != "" {
						keep = append(keep, p)
					}
				}
				n.Content = keep
			}
		}
		if n := field(w, "ne"); n != nil {
			for i := 0; i < len(n.Content); i += 2 {
				n.Content[i].Value = v3Path(n.Content[i].Value)
			}
		}
	}
}

func v3Envelope(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	delete(m, "action")
	if c, ok := m["count"]; ok {
		m["total"] = c
		delete(m, "count")
	}
	if node, ok := m["node"].(map[string]any); ok {
		delete(m, "node")
		for k, x := range node {
			switch k {
			case "nodes":
				m["list"] = x
			case "dir":
			default:
				m[k] = x
			}
		}
	}
	return m
}

// v3Path rewrites a dotted path into an answer ("" drops it).
func v3Path(p string) string {
	switch {
	case p == "action":
		return ""
	case p == "count":
		return "total"
	case strings.HasPrefix(p, "node.nodes"):
		return "list" + strings.TrimPrefix(p, "node.nodes")
	case strings.HasPrefix(p, "node."):
		return strings.TrimPrefix(p, "node.")
	}
	return p
}

var sslPathRE = regexp.MustCompile(`/apisix/(admin/)?ssl\b`)

// ssls is 3.0's rename of the ssl resource.
func ssls(s string) string { return sslPathRE.ReplaceAllString(s, "/apisix/${1}ssls") }

func copyNode(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, x := range n.Content {
		c.Content[i] = copyNode(x)
	}
	return &c
}

// inheritFileFields gives the draft the prior file's settings its reused
// cases rely on: the store (etcd steps), port servers and gateway flags.
func inheritFileFields(root, prior *yaml.Node) {
	for _, k := range []string{"store", "port_servers"} {
		if v := field(prior, k); v != nil && field(root, k) == nil {
			kv(root, k, copyNode(v))
		}
	}
	if pa := field(prior, "args"); pa != nil {
		if a := field(root, "args"); a != nil {
			a.Content = append(a.Content, copyNode(pa).Content...)
		} else {
			kv(root, "args", copyNode(pa))
		}
	}
	// keep "cases" last, as the drafter writes it
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "cases" {
			k, v := root.Content[i], root.Content[i+1]
			root.Content = append(append(root.Content[:i:i], root.Content[i+2:]...), k, v)
			break
		}
	}
}

// inheritSkip carries the skip mark of the prior port's block of the same
// (unique) title — a feature linkgate does not claim — onto a block whose
// text changed; the case loses its draft steps and review note.
func inheritSkip(c, prior *yaml.Node) {
	v := field(prior, "skip")
	if v == nil {
		return
	}
	c.Content = []*yaml.Node{c.Content[0], c.Content[1], c.Content[2], c.Content[3]} // test, name
	kv(c, "skip", str(v.Value+" (as the 2.14 port of this block)"))
}
