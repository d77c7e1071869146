package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.VisitStore = (*Store)(nil)

// Visit statistics live on the link's own item, as top-level number
// attributes that one UpdateItem ADD per link and batch increments, so
// concurrent instances never lose each other's counts and no read is
// needed to write: visits (the total, which Get reports), bots, and one
// attribute per day, referrer host, browser, bot and country, named with
// a prefix:
//
//	vd:2026-03-14  vr:news.example.com  vb:Firefox  vx:Slack  vc:DE
//
// shortURL and originalURL are untouched, so the seed's app still reads
// the item. Reading the statistics folds what is over the bounds
// (shortener.MaxStatDays, MaxStatReferrers, MaxStatKeys) back into the
// item, so it stays small.
const (
	AttrBots      = "bots"
	prefixDay     = "vd:"
	prefixRef     = "vr:"
	prefixBrowser = "vb:"
	prefixBot     = "vx:"
	prefixCountry = "vc:"
)

// breakdowns pairs each prefix with its field of VisitStats.
func breakdowns(st *shortener.VisitStats) []struct {
	prefix string
	b      *shortener.Breakdown
} {
	return []struct {
		prefix string
		b      *shortener.Breakdown
	}{{prefixDay, &st.Days}, {prefixRef, &st.Referrers}, {prefixBrowser, &st.Browsers}, {prefixBot, &st.BotAgents}, {prefixCountry, &st.Countries}}
}

// visitWriters bounds the UpdateItem calls of one batch in flight.
const visitWriters = 64

// kindPrefix is the attribute prefix of each breakdown.
var kindPrefix = [shortener.NumVisitKinds]string{prefixDay, prefixRef, prefixBrowser, prefixBot, prefixCountry}

// AddVisits makes one UpdateItem ADD per link, up to visitWriters at a
// time, each conditional on the link existing (a deleted link is not
// brought back as an item of counters). Links that succeeded, or that are
// gone, are marked Applied; the first error is returned.
func (s *Store) AddVisits(ctx context.Context, batch *shortener.VisitBatch) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, visitWriters)
	)
	for i := range batch.Links {
		d := &batch.Links[i]
		if d.Total == 0 || !validKey(d.ID) {
			d.Applied = true
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := s.addVisits(ctx, batch.Keys, d)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			d.Applied = true
		})
	}
	wg.Wait()
	return first
}

func (s *Store) addVisits(ctx context.Context, keys []shortener.VisitKey, d *shortener.LinkVisits) error {
	names := map[string]string{"#id": AttrID}
	values := map[string]types.AttributeValue{}
	var adds []string
	add := func(attr string, n int64) {
		if n == 0 {
			return
		}
		k := "#a" + strconv.Itoa(len(adds))
		v := ":v" + strconv.Itoa(len(adds))
		names[k], values[v] = attr, number(n)
		adds = append(adds, k+" "+v)
	}
	add(AttrVisits, d.Total)
	add(AttrBots, d.Bots)
	// One ADD per attribute: DynamoDB refuses overlapping paths.
	counts := make(map[string]int64, len(d.Counts))
	for _, c := range d.Counts {
		k := keys[c.Key]
		counts[kindPrefix[k.Kind]+k.Name] += c.N
	}
	for attr, n := range counts {
		add(attr, n)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &ddb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(d.ID),
		UpdateExpression:          aws.String("ADD " + strings.Join(adds, ", ")),
		ConditionExpression:       aws.String("attribute_exists(#id)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // the link was deleted: its visits go with it
	}
	if err != nil {
		return s.fail("add visits "+quote(d.ID), err)
	}
	return nil
}

// VisitStats reads the link's item and returns its statistics. When a
// breakdown has grown past its bound it folds the excess (conditionally,
// so increments made meanwhile are never lost; a fold that loses the race
// is simply tried on a later read).
func (s *Store) VisitStats(ctx context.Context, id string) (shortener.VisitStats, error) {
	if !validKey(id) {
		return shortener.VisitStats{}, shortener.ErrNotFound
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.GetItem(tctx, &ddb.GetItemInput{TableName: &s.table, Key: key(id), ConsistentRead: &s.consistent})
	if err != nil {
		return shortener.VisitStats{}, s.fail("visit stats "+quote(id), err)
	}
	if out.Item == nil {
		return shortener.VisitStats{}, shortener.ErrNotFound
	}
	st, err := decodeStats(out.Item)
	if err != nil {
		return shortener.VisitStats{}, fmt.Errorf("visit stats %q: malformed item: %w", id, err)
	}
	bounded := copyStats(st)
	bounded.Bound()
	if err := s.fold(ctx, id, st, bounded); err != nil {
		return shortener.VisitStats{}, err
	}
	return bounded, nil
}

func decodeStats(item map[string]types.AttributeValue) (shortener.VisitStats, error) {
	var st shortener.VisitStats
	var err error
	if st.Total, err = integer(item, AttrVisits); err != nil {
		return st, err
	}
	if st.Bots, err = integer(item, AttrBots); err != nil {
		return st, err
	}
	bds := breakdowns(&st)
	for name := range item {
		for _, bd := range bds {
			if k, ok := strings.CutPrefix(name, bd.prefix); ok {
				n, err := integer(item, name)
				if err != nil {
					return st, err
				}
				if *bd.b == nil {
					*bd.b = shortener.Breakdown{}
				}
				(*bd.b)[k] = n
			}
		}
	}
	return st, nil
}

func copyStats(st shortener.VisitStats) shortener.VisitStats {
	var c shortener.VisitStats
	c.Add(st)
	return c
}

// foldChunk bounds the attributes one folding UpdateItem removes, which
// keeps its expressions under DynamoDB's 4 KB limit.
const foldChunk = 80

// fold rewrites the item's breakdowns from st to bounded: it removes the
// keys bounding dropped and adds their counts to the breakdown's (other)
// key (old days are just dropped), provided the removed attributes still
// hold the values read.
func (s *Store) fold(ctx context.Context, id string, st, bounded shortener.VisitStats) error {
	type removal struct {
		prefix, attr string
		n            int64
	}
	var rm []removal
	nb := breakdowns(&bounded)
	for i, bd := range breakdowns(&st) {
		for k, n := range *bd.b {
			if _, kept := (*nb[i].b)[k]; !kept {
				rm = append(rm, removal{bd.prefix, bd.prefix + k, n})
			}
		}
	}
	for len(rm) > 0 {
		chunk := rm[:min(foldChunk, len(rm))]
		rm = rm[len(chunk):]
		names := map[string]string{}
		values := map[string]types.AttributeValue{}
		var removes, conds, adds []string
		other := map[string]int64{}
		for i, r := range chunk {
			a, v := "#r"+strconv.Itoa(i), ":r"+strconv.Itoa(i)
			names[a], values[v] = r.attr, number(r.n)
			removes = append(removes, a)
			conds = append(conds, a+" = "+v)
			if r.prefix != prefixDay {
				other[r.prefix] += r.n
			}
		}
		for prefix, n := range other {
			a, v := "#o"+strconv.Itoa(len(adds)), ":o"+strconv.Itoa(len(adds))
			names[a], values[v] = prefix+shortener.OtherKey, number(n)
			adds = append(adds, a+" "+v)
		}
		expr := "REMOVE " + strings.Join(removes, ", ")
		if len(adds) > 0 {
			expr += " ADD " + strings.Join(adds, ", ")
		}
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.client.UpdateItem(tctx, &ddb.UpdateItemInput{
			TableName:                 &s.table,
			Key:                       key(id),
			UpdateExpression:          aws.String(expr),
			ConditionExpression:       aws.String(strings.Join(conds, " AND ")),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
		})
		cancel()
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return nil // counts moved meanwhile: fold on a later read
		}
		if err != nil {
			return s.fail("fold visit stats "+quote(id), err)
		}
	}
	return nil
}
