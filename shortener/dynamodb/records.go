package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.RecordStore = (*Store)(nil)

// Imports (docs/dynamodb.md, "Export and import"). A link whose statistics
// are all on its item (none, or only the visit total of a link with a
// visit limit) is one conditional PutItem, attribute_not_exists(shortURL).
// The others go in transactions (TransactWriteItems) of up to
// importTxLinks links: each link's conditional Put, and one visit log
// record holding all their statistics (its data in its header, as the
// visit log writes small records), which the fold merges into the state
// items like any other. A link is never there without its statistics, nor
// statistics without their link. A link whose id is taken cancels the
// transaction; DynamoDB says which, the existing item comes back with the
// answer (ReturnValuesOnConditionCheckFailure), and the rest is written
// again without it.
const (
	importTxLinks     = 99        // TransactWriteItems takes 100 items: the links and the record
	importRecordBytes = 300 << 10 // a record's data, under DynamoDB's 400 KB an item
	importAttempts    = 8         // tries of a transaction that conflicts with other writes
)

// ImportRecords stores each record whose id is free with its statistics
// (see above) and says per record what it did: a link already stored,
// the same, is Unchanged; another link under the id makes the record
// Conflicting. Records are written in parallel, each link with its
// statistics at once; on an error some may have been written, but none
// when it is a *shortener.RecordError (all are checked first).
func (s *Store) ImportRecords(ctx context.Context, recs []shortener.LinkRecord) ([]shortener.ImportResult, error) {
	results := make([]shortener.ImportResult, len(recs))
	seen := make(map[string]bool, len(recs))
	var plain, again []int
	var txs [][]int
	var txBytes int
	now := s.visits.now()
	for i := range recs {
		l := recs[i].Link
		if !shortener.ValidKey(l.ID) {
			return nil, &shortener.RecordError{Index: i, Err: fmt.Errorf("import: invalid id %q", l.ID)}
		}
		if err := checkItem(l); err != nil {
			return nil, &shortener.RecordError{Index: i, Err: fmt.Errorf("%s: %w", l.ID, err)}
		}
		if seen[l.ID] {
			again = append(again, i) // after the first is written: then it is stored
			continue
		}
		seen[l.ID] = true
		st := logStats(recs[i])
		if st.IsZero() {
			plain = append(plain, i)
			continue
		}
		set := newDeltaSet()
		set.addStats(l.ID, unix(l.CreatedAt), st, now)
		n := len(set.encode(nil))
		if len(txs) == 0 || len(txs[len(txs)-1]) == importTxLinks || txBytes+n > importRecordBytes {
			txs, txBytes = append(txs, nil), 0
		}
		txs[len(txs)-1] = append(txs[len(txs)-1], i)
		txBytes += n
	}
	err := inParallel(len(plain)+len(txs), func(k int) error {
		if k < len(plain) {
			i := plain[k]
			r, err := s.importPlain(ctx, recs[i])
			results[i] = r
			return err
		}
		return s.importTx(ctx, recs, txs[k-len(plain)], results)
	})
	if err != nil {
		return nil, err
	}
	if len(again) > 0 {
		dups := make([]shortener.LinkRecord, len(again))
		for k, i := range again {
			dups[k] = recs[i]
		}
		res, err := s.ImportRecords(ctx, dups)
		if err != nil {
			return nil, err
		}
		for k, i := range again {
			results[i] = res[k]
		}
	}
	return results, nil
}

// logStats returns the statistics of rec that go to the visit log: all of
// them, but for a link with a visit limit its visit total, which is on
// its item (where the limit is enforced).
func logStats(rec shortener.LinkRecord) shortener.VisitStats {
	st := rec.Stats
	st.Bound()
	if rec.Link.MaxVisits > 0 {
		st.Total = 0
	}
	return st
}

// importItem is rec's link item: the link as Create writes it, and for a
// link with a visit limit its visits counted so far added to its visits.
func importItem(rec shortener.LinkRecord) map[string]types.AttributeValue {
	item := encode(rec.Link)
	if rec.Link.MaxVisits > 0 && rec.Stats.Total != 0 {
		item[AttrVisits] = number(rec.Link.Visits + rec.Stats.Total)
	}
	return item
}

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// importPlain writes rec's item unless its id is taken.
func (s *Store) importPlain(ctx context.Context, rec shortener.LinkRecord) (shortener.ImportResult, error) {
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.client.PutItem(cctx, &ddb.PutItemInput{
			TableName:                           &s.table,
			Item:                                importItem(rec),
			ConditionExpression:                 aws.String("attribute_not_exists(" + AttrID + ")"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		cancel()
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return shortener.Imported, nil
		case !errors.As(err, &ccf):
			return 0, s.fail("import link "+quote(rec.Link.ID), err)
		}
		r, gone, err := s.importedOver(ctx, rec.Link, ccf.Item)
		if err != nil || !gone || attempt == importAttempts {
			return r, err
		}
	}
}

// importedOver says what importing l did, its write refused because
// stored (nil if DynamoDB did not return it) held its id. gone means that
// no item is there any more (deleted since): write again.
func (s *Store) importedOver(ctx context.Context, l shortener.Link, stored map[string]types.AttributeValue) (r shortener.ImportResult, gone bool, err error) {
	if stored == nil {
		if stored, err = s.getItem(ctx, l.ID, true); err != nil || stored == nil {
			return shortener.Conflicting, err == nil, err
		}
	}
	old, err := exportedLink(stored)
	if err != nil {
		return 0, false, fmt.Errorf("import %q: the stored item is malformed: %w", l.ID, err)
	}
	return shortener.ImportOver(old, l), false, nil
}

// exportedLink is the link of item as exports give it: its Visits are
// those it was created with.
func exportedLink(item map[string]types.AttributeValue) (shortener.Link, error) {
	l, err := decode(item)
	if err != nil {
		return l, err
	}
	l.Visits, err = integer(item, AttrCreatedVisits)
	return l, err
}

// importTx writes the records recs[idx] with their statistics in one
// transaction (see above), setting their results.
func (s *Store) importTx(ctx context.Context, recs []shortener.LinkRecord, idx []int, results []shortener.ImportResult) error {
	var n int64 // the record's number; 0: take one
	pending := idx
	for attempt := 0; len(pending) > 0; attempt++ { // attempt: tries that settled no link
		if attempt == importAttempts {
			return fmt.Errorf("dynamodb import: a transaction of %d links conflicted with other writes %d times: %w",
				len(pending), attempt, shortener.ErrUnavailable)
		}
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return s.fail("import links", ctx.Err())
			case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
			}
		}
		now := s.visits.now()
		set := newDeltaSet()
		for _, i := range pending {
			set.addStats(recs[i].Link.ID, unix(recs[i].Link.CreatedAt), logStats(recs[i]), now)
		}
		rec := &record{set: set, blobs: [][]byte{set.encode(nil)}}
		rec.bytes = len(rec.blobs[0])
		if n == 0 {
			var err error
			if n, err = s.number(ctx, rec.bytes); err != nil {
				return err
			}
		}
		rec.n = n
		items := make([]types.TransactWriteItem, 0, len(pending)+1)
		for _, i := range pending {
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName:                           &s.table,
				Item:                                importItem(recs[i]),
				ConditionExpression:                 aws.String("attribute_not_exists(" + AttrID + ")"),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}})
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:           &s.table,
			Item:                headerItem(rec, s.visits.writer, now),
			ConditionExpression: aws.String("attribute_not_exists(" + AttrID + ")"),
		}})
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.client.TransactWriteItems(cctx, &ddb.TransactWriteItemsInput{TransactItems: items})
		cancel()
		if err == nil {
			for _, i := range pending {
				results[i] = shortener.Imported
			}
			return nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) || len(tce.CancellationReasons) != len(items) {
			return s.fail("import links", err)
		}
		var keep []int
		for k, reason := range tce.CancellationReasons {
			code := aws.ToString(reason.Code)
			switch {
			case code != "None" && code != "ConditionalCheckFailed" && code != "TransactionConflict":
				return s.fail("import links", err)
			case k == len(pending):
				if code == "ConditionalCheckFailed" {
					n = 0 // the fold voided the number meanwhile: take another
				}
			case code == "ConditionalCheckFailed":
				i := pending[k]
				r, gone, err := s.importedOver(ctx, recs[i].Link, reason.Item)
				if err != nil {
					return err
				}
				if gone {
					keep = append(keep, i)
					continue
				}
				results[i] = r
			default:
				keep = append(keep, pending[k])
			}
		}
		if len(keep) < len(pending) {
			attempt = -1 // some links settled: the rest start afresh
		}
		pending = keep
	}
	return nil // every link was there already: the number taken stays uncommitted, and the fold voids it
}

// exportPage is how many items one Scan call of an export reads.
const exportPage = 200

// ExportRecords calls fn with every link and its statistics, in the
// table's order (by key hash), one Scan page at a time, the statistics of
// a page's links read in parallel (VisitStats: three round trips each).
// DynamoDB has no snapshot: a link created or deleted during the export
// may or may not be in it; every link there for the whole export is, once.
func (s *Store) ExportRecords(ctx context.Context, fn func(shortener.LinkRecord) error) error {
	in := &ddb.ScanInput{TableName: &s.table, Limit: aws.Int32(exportPage), ConsistentRead: aws.Bool(true)}
	for {
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		out, err := s.client.Scan(cctx, in)
		cancel()
		if err != nil {
			return s.fail("export links", err)
		}
		var page []shortener.LinkRecord
		for _, item := range out.Items {
			if k, _ := str(item, AttrID); strings.HasPrefix(k, reservedPrefix) {
				continue
			}
			l, err := exportedLink(item)
			if err != nil {
				return fmt.Errorf("export: malformed item: %w", err)
			}
			page = append(page, shortener.LinkRecord{Link: l})
		}
		gone := make([]bool, len(page))
		err = inParallel(len(page), func(i int) error {
			r := &page[i]
			st, err := s.VisitStats(ctx, r.Link.ID)
			if errors.Is(err, shortener.ErrNotFound) {
				gone[i] = true // deleted since the scan
				return nil
			}
			st.Total -= r.Link.Visits
			r.Stats = st
			return err
		})
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		for i := range page {
			if gone[i] {
				continue
			}
			if err := fn(page[i]); err != nil {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
