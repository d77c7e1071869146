package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// A shape is a traffic shape: which links the redirects go to.
type shape struct {
	Name  string  // "uniform" or "zipf"
	Links int     // how many links the traffic is spread over
	S     float64 // Zipf exponent (zipf only)
}

func (s shape) String() string {
	if s.Name == "zipf" {
		return fmt.Sprintf("Zipf s=%g over %s links", s.S, count(s.Links))
	}
	return "uniform over " + count(s.Links) + " links"
}

// parseShape reads "uniform:100000" or "zipf:1.1:1000000".
func parseShape(v string) (shape, error) {
	f := strings.Split(v, ":")
	switch {
	case len(f) == 2 && f[0] == "uniform":
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 1 {
			return shape{}, fmt.Errorf("shape %q: want uniform:LINKS", v)
		}
		return shape{Name: "uniform", Links: n}, nil
	case len(f) == 3 && f[0] == "zipf":
		s, err1 := strconv.ParseFloat(f[1], 64)
		n, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || s <= 1 || n < 2 {
			return shape{}, fmt.Errorf("shape %q: want zipf:S:LINKS with S > 1", v)
		}
		return shape{Name: "zipf", Links: n, S: s}, nil
	}
	return shape{}, fmt.Errorf("shape %q: want uniform:LINKS or zipf:S:LINKS", v)
}

// sequence returns n link numbers (0 ≤ k < Links) drawn from the shape
// with a fixed seed: every build is measured under the same traffic. For
// Zipf, link k is the (k+1)-th most visited, with probability ∝ (k+1)^-S.
func (s shape) sequence(n int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make([]int, n)
	if s.Name == "zipf" {
		z := rand.NewZipf(rng, s.S, 1, uint64(s.Links-1))
		for i := range out {
			out[i] = int(z.Uint64())
		}
		return out
	}
	for i := range out {
		out[i] = rng.IntN(s.Links)
	}
	return out
}

// linkID is the id of link k: 10 characters of base62, as linkgate's
// generated ids, derived from k (splitmix64) so that any run can rebuild
// the set of ids.
func linkID(k int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	x := uint64(k) + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	var b [10]byte // the low ten base-62 digits of x: 62^10 ≈ 8·10^17 ids, so a few million never collide in practice
	for i := range b {
		b[i] = alphabet[x%62]
		x /= 62
	}
	return string(b[:])
}

// distinct returns the distinct link numbers of seq, in first-seen order.
func distinct(seq []int) []int {
	seen := make(map[int]struct{}, len(seq))
	var out []int
	for _, k := range seq {
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}

// count formats n as 100k or 1M when it is round.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}
