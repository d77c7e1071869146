package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.DomainStore = (*Store)(nil)

// The domain registry is one item of the links' table under the reserved
// prefix (skipped by List), a map from host to entry:
//
//	shortURL = "linkgate:domains"   dm (M) host → M{s (S) scheme, c (N)
//	created, Unix seconds}
//
// One item, so that an instance reads the whole registry with one
// strongly consistent GetItem (its refresh, every few seconds: 1 read
// unit per 4 KB, about 60 domains) instead of a Scan of the table. Adds
// and deletes are conditional UpdateItems of one map entry, so concurrent
// writers never lose each other's; the item's size (400 KB) holds
// shortener.MaxRegisteredDomains entries of the longest hosts.
const (
	registryItemID = reservedPrefix + "domains"
	attrDomainMap  = "dm"
	attrDomScheme  = "s"
	attrDomCreated = "c"
)

func registryNames(host string) map[string]string {
	return map[string]string{"#dm": attrDomainMap, "#h": host}
}

// AddDomain adds d's entry unless the host has one, or the map holds
// shortener.MaxRegisteredDomains: one conditional UpdateItem, and a
// PutItem of the item for the first domain.
func (s *Store) AddDomain(ctx context.Context, d shortener.Domain) error {
	if !shortener.ValidRegisteredDomain(d) {
		return shortener.Errorf(shortener.InvalidParameter, "invalid domain %q", d.Host)
	}
	entry := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		attrDomScheme:  &types.AttributeValueMemberS{Value: d.Scheme},
		attrDomCreated: number(d.CreatedAt.Unix()),
	}}
	for range 3 { // the item may be created between the calls
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.client.UpdateItem(tctx, &ddb.UpdateItemInput{
			TableName:                 &s.table,
			Key:                       key(registryItemID),
			UpdateExpression:          aws.String("SET #dm.#h = :v"),
			ConditionExpression:       aws.String("attribute_not_exists(#dm.#h) AND size(#dm) < :max"),
			ExpressionAttributeNames:  registryNames(d.Host),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": entry, ":max": number(shortener.MaxRegisteredDomains)},
		})
		cancel()
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &ccf):
			return s.fail("add domain "+quote(d.Host), err)
		}
		// Taken, full, or no item yet: which one, the item says.
		m, err := s.registry(ctx)
		switch {
		case err != nil:
			return err
		case m == nil:
			item := key(registryItemID)
			item[attrDomainMap] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{d.Host: entry}}
			if err := s.putNew(ctx, "add domain", d.Host, item); !errors.Is(err, shortener.ErrConflict) {
				return err
			}
		case m[d.Host] != nil:
			return fmt.Errorf("add domain %q: %w", d.Host, shortener.ErrConflict)
		case len(m) >= shortener.MaxRegisteredDomains:
			return shortener.Errorf(shortener.InvalidParameter, "the registry holds %d domains, its most", len(m))
		}
	}
	return fmt.Errorf("add domain %q: the registry's item keeps changing: %w", d.Host, shortener.ErrUnavailable)
}

// registry reads the registry's map, strongly consistent; nil if the
// item does not exist.
func (s *Store) registry(ctx context.Context) (map[string]types.AttributeValue, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.GetItem(ctx, &ddb.GetItemInput{TableName: &s.table, Key: key(registryItemID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, s.fail("list domains", err)
	}
	if out.Item == nil {
		return nil, nil
	}
	m, ok := out.Item[attrDomainMap].(*types.AttributeValueMemberM)
	if !ok {
		return nil, fmt.Errorf("list domains: attribute %s is %T, want a map", attrDomainMap, out.Item[attrDomainMap])
	}
	return m.Value, nil
}

// Domains reads the registry's item.
func (s *Store) Domains(ctx context.Context) ([]shortener.Domain, error) {
	m, err := s.registry(ctx)
	if err != nil {
		return nil, err
	}
	ds := make([]shortener.Domain, 0, len(m))
	for host, v := range m {
		e, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			return nil, fmt.Errorf("list domains: entry %q is %T, want a map", host, v)
		}
		d := shortener.Domain{Host: host}
		if d.Scheme, err = str(e.Value, attrDomScheme); err != nil {
			return nil, fmt.Errorf("list domains: entry %q: %w", host, err)
		}
		if d.CreatedAt, err = unixTime(e.Value, attrDomCreated); err != nil {
			return nil, fmt.Errorf("list domains: entry %q: %w", host, err)
		}
		if !shortener.ValidRegisteredDomain(d) {
			return nil, fmt.Errorf("list domains: malformed entry %q", host)
		}
		ds = append(ds, d)
	}
	slices.SortFunc(ds, func(a, b shortener.Domain) int { return strings.Compare(a.Host, b.Host) })
	return ds, nil
}

// DeleteDomain removes the host's entry (ErrNotFound if there is none).
func (s *Store) DeleteDomain(ctx context.Context, host string) error {
	if !shortener.ValidDomain(host) {
		return fmt.Errorf("delete domain %q: %w", host, shortener.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &ddb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      key(registryItemID),
		UpdateExpression:         aws.String("REMOVE #dm.#h"),
		ConditionExpression:      aws.String("attribute_exists(#dm.#h)"),
		ExpressionAttributeNames: registryNames(host),
	})
	return s.conditional("delete domain", host, err, shortener.ErrNotFound)
}
