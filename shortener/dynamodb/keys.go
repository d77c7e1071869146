package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.KeyStore = (*Store)(nil)

// API keys are items of the links' table under the reserved prefix
// (skipped by List), so the table keeps the seed's layout:
//
//	shortURL = "linkgate:k:" + id   kn (S) name, kh (B) SHA-256 of the
//	secret, ks (SS) scopes, createdAt (N), lu (N) last used, Unix seconds
//
// Reads of a key are strongly consistent: a key revoked through one
// instance is refused by every other one at its next read (the HTTP layer
// reads a key at most once a second). ListKeys is a Scan of the whole
// table, filtered: its cost is the table's size, for an admin call.
const (
	keyItemPrefix = reservedPrefix + "k:"
	attrKeyName   = "kn"
	attrKeyHash   = "kh"
	attrKeyScopes = "ks"
	attrLastUsed  = "lu"
)

func keyItemKey(id string) map[string]types.AttributeValue { return key(keyItemPrefix + id) }

func encodeKeyItem(k shortener.APIKey) map[string]types.AttributeValue {
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	item := keyItemKey(k.ID)
	item[attrKeyName] = &types.AttributeValueMemberS{Value: k.Name}
	item[attrKeyHash] = &types.AttributeValueMemberB{Value: k.Hash[:]}
	item[attrKeyScopes] = &types.AttributeValueMemberSS{Value: scopes}
	item[AttrCreatedAt] = number(k.CreatedAt.Unix())
	if !k.LastUsed.IsZero() {
		item[attrLastUsed] = number(k.LastUsed.Unix())
	}
	return item
}

func decodeKeyItem(item map[string]types.AttributeValue) (shortener.APIKey, error) {
	var k shortener.APIKey
	id, err := str(item, AttrID)
	if err != nil {
		return k, err
	}
	k.ID = id[len(keyItemPrefix):]
	if k.Name, err = str(item, attrKeyName); err != nil {
		return k, err
	}
	h, ok := item[attrKeyHash].(*types.AttributeValueMemberB)
	if !ok || len(h.Value) != len(k.Hash) {
		return k, fmt.Errorf("key %q: no hash", k.ID)
	}
	copy(k.Hash[:], h.Value)
	if ss, ok := item[attrKeyScopes].(*types.AttributeValueMemberSS); ok {
		for _, s := range ss.Value {
			k.Scopes = append(k.Scopes, shortener.Scope(s))
		}
		slices.Sort(k.Scopes)
	}
	if k.CreatedAt, err = unixTime(item, AttrCreatedAt); err != nil {
		return k, err
	}
	if k.LastUsed, err = unixTime(item, attrLastUsed); err != nil {
		return k, err
	}
	return k, nil
}

// CreateKey puts the key's item unless one exists.
func (s *Store) CreateKey(ctx context.Context, k shortener.APIKey) error {
	if !shortener.ValidKeyID(k.ID) {
		return shortener.Errorf(shortener.InvalidParameter, "invalid key id")
	}
	return s.putNew(ctx, "create key", k.ID, encodeKeyItem(k))
}

// GetKey reads the key's item, strongly consistent.
func (s *Store) GetKey(ctx context.Context, id string) (shortener.APIKey, error) {
	if !shortener.ValidKeyID(id) {
		return shortener.APIKey{}, shortener.ErrNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.GetItem(ctx, &ddb.GetItemInput{TableName: &s.table, Key: keyItemKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return shortener.APIKey{}, s.fail("get key "+quote(id), err)
	}
	if out.Item == nil {
		return shortener.APIKey{}, shortener.ErrNotFound
	}
	return decodeKeyItem(out.Item)
}

// ListKeys scans the table for key items.
func (s *Store) ListKeys(ctx context.Context) ([]shortener.APIKey, error) {
	keys := []shortener.APIKey{}
	in := &ddb.ScanInput{
		TableName:                 &s.table,
		FilterExpression:          aws.String("begins_with(#id, :p)"),
		ExpressionAttributeNames:  map[string]string{"#id": AttrID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: keyItemPrefix}},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		out, err := s.client.Scan(tctx, in)
		cancel()
		if err != nil {
			return nil, s.fail("list keys", err)
		}
		for _, item := range out.Items {
			k, err := decodeKeyItem(item)
			if err != nil {
				return nil, fmt.Errorf("list keys: malformed item: %w", err)
			}
			keys = append(keys, k)
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	slices.SortFunc(keys, func(a, b shortener.APIKey) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return keys, nil
}

// DeleteKey deletes the key's item (ErrNotFound if there is none).
func (s *Store) DeleteKey(ctx context.Context, id string) error {
	if !shortener.ValidKeyID(id) {
		return shortener.ErrNotFound
	}
	return s.deleteItem(ctx, "delete key", id, keyItemKey(id))
}

// TouchKey sets the key's last use to t when that is later than the
// stored one, in one conditional UpdateItem.
func (s *Store) TouchKey(ctx context.Context, id string, t time.Time) error {
	if !shortener.ValidKeyID(id) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &ddb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       keyItemKey(id),
		UpdateExpression:          aws.String("SET #lu = :t"),
		ConditionExpression:       aws.String("attribute_exists(#id) AND (attribute_not_exists(#lu) OR #lu < :t)"),
		ExpressionAttributeNames:  map[string]string{"#id": AttrID, "#lu": attrLastUsed},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Unix(), 10)}},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // gone, or already used later
	}
	if err != nil {
		return s.fail("touch key "+quote(id), err)
	}
	return nil
}
