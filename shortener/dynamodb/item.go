package dynamodb

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

// Attribute names. The first two are the seed's table layout (its Go struct
// tags are `dynamodbav:"shortURL"` and `dynamodbav:"originalURL"`), so items
// either program writes resolve in the other. The rest are linkgate's and
// are left out when zero; the seed's app ignores them.
const (
	AttrID        = "shortURL"    // S, the partition key
	AttrURL       = "originalURL" // S
	AttrCreatedAt = "createdAt"   // N, Unix seconds
	AttrExpiresAt = "expiresAt"   // N, Unix seconds; the table's TTL attribute
	AttrMaxVisits = "maxVisits"   // N
	AttrVisits    = "visits"      // N, a counter (UpdateItem ADD)
	// AttrCreatedVisits is the part of visits the link was created with
	// (imports carry them); the rest of visits was counted since. Exports
	// give it as the link's Visits, the rest as its statistics.
	AttrCreatedVisits = "createdVisits" // N
	AttrTags          = "tags"          // SS, the link's tags
	AttrForward       = "forwardQuery"  // N, shortener.Forward (1 on, 2 off)
)

// DynamoDB limits (developer guide, "Quotas"): a partition key is 1 to 2048
// bytes; an item, attribute names and values together, at most 400 KB.
const (
	maxKeyBytes  = 2048
	maxItemBytes = 400 * 1024
)

// validKey reports whether id can be a partition key value at all. Lookups
// of other ids answer ErrNotFound without a call (DynamoDB would reject
// them with a ValidationException).
func validKey(id string) bool {
	return len(id) > 0 && len(id) <= maxKeyBytes && utf8.ValidString(id)
}

// itemSize is an upper bound of the size DynamoDB charges l's item: every
// attribute's name plus its value, numbers counted at their 21-byte maximum.
func itemSize(l shortener.Link) int {
	const number = 21
	n := len(AttrID) + len(l.ID) + len(AttrURL) + len(l.URL)
	if !l.CreatedAt.IsZero() {
		n += len(AttrCreatedAt) + number
	}
	if !l.ExpiresAt.IsZero() {
		n += len(AttrExpiresAt) + number
	}
	if l.MaxVisits != 0 {
		n += len(AttrMaxVisits) + number
	}
	if l.Visits != 0 {
		n += len(AttrVisits) + len(AttrCreatedVisits) + 2*number
	}
	if len(l.Tags) > 0 {
		n += len(AttrTags)
		for _, t := range l.Tags {
			n += len(t)
		}
	}
	if l.ForwardQuery != shortener.ForwardDefault {
		n += len(AttrForward) + number
	}
	return n
}

// checkItem rejects a link DynamoDB would refuse, with the domain error a
// client can act on, before any call.
func checkItem(l shortener.Link) error {
	if !validKey(l.ID) {
		return shortener.Errorf(shortener.InvalidSlug, "id must be 1 to %d bytes of UTF-8", maxKeyBytes)
	}
	if strings.HasPrefix(l.ID, reservedPrefix) { // a domain "linkgate:PORT" would hide its links among the store's own items
		return shortener.Errorf(shortener.InvalidParameter, "links of the domain %q cannot be kept in DynamoDB (its prefix is reserved)", strings.TrimSuffix(reservedPrefix, ":"))
	}
	if !utf8.ValidString(l.URL) {
		return shortener.Errorf(shortener.InvalidURL, "URL is not valid UTF-8")
	}
	if itemSize(l) > maxItemBytes {
		return shortener.Errorf(shortener.URLTooLong, "URL too long for a DynamoDB item (%d KB at most)", maxItemBytes/1024)
	}
	return nil
}

func key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: id}}
}

func number(v int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// encode returns l's item. Zero optional fields are left out, so a plain
// link is exactly the seed's item plus createdAt. The visits a link is
// created with are both its visits and its createdVisits.
func encode(l shortener.Link) map[string]types.AttributeValue {
	item := make(map[string]types.AttributeValue, 6)
	item[AttrID] = &types.AttributeValueMemberS{Value: l.ID}
	item[AttrURL] = &types.AttributeValueMemberS{Value: l.URL}
	if !l.CreatedAt.IsZero() {
		item[AttrCreatedAt] = number(l.CreatedAt.Unix())
	}
	if !l.ExpiresAt.IsZero() {
		item[AttrExpiresAt] = number(l.ExpiresAt.Unix())
	}
	if l.MaxVisits != 0 {
		item[AttrMaxVisits] = number(l.MaxVisits)
	}
	if l.Visits != 0 {
		item[AttrVisits] = number(l.Visits)
		item[AttrCreatedVisits] = number(l.Visits)
	}
	if len(l.Tags) > 0 {
		item[AttrTags] = &types.AttributeValueMemberSS{Value: l.Tags}
	}
	if l.ForwardQuery != shortener.ForwardDefault {
		item[AttrForward] = number(int64(l.ForwardQuery))
	}
	return item
}

// decode reads an item written by linkgate or by the seed's app (only
// shortURL and originalURL). Missing optional attributes are zero; an
// attribute of the wrong type is an error.
func decode(item map[string]types.AttributeValue) (shortener.Link, error) {
	var l shortener.Link
	var err error
	if l.ID, err = str(item, AttrID); err != nil {
		return l, err
	}
	if l.ID == "" {
		return l, fmt.Errorf("item has no %s", AttrID)
	}
	if l.URL, err = str(item, AttrURL); err != nil {
		return l, err
	}
	if l.CreatedAt, err = unixTime(item, AttrCreatedAt); err != nil {
		return l, err
	}
	if l.ExpiresAt, err = unixTime(item, AttrExpiresAt); err != nil {
		return l, err
	}
	if l.MaxVisits, err = integer(item, AttrMaxVisits); err != nil {
		return l, err
	}
	if l.Visits, err = integer(item, AttrVisits); err != nil {
		return l, err
	}
	if l.Tags, err = stringSet(item, AttrTags); err != nil {
		return l, err
	}
	f, err := integer(item, AttrForward)
	if err != nil {
		return l, err
	}
	if f < 0 || f > int64(shortener.ForwardOff) {
		return l, fmt.Errorf("attribute %s = %d is not a forward-query setting", AttrForward, f)
	}
	l.ForwardQuery = shortener.Forward(f)
	return l, nil
}

// stringSet reads a string set, sorted (DynamoDB keeps no order); nil
// when missing.
func stringSet(item map[string]types.AttributeValue, name string) ([]string, error) {
	switch v := item[name].(type) {
	case nil:
		return nil, nil
	case *types.AttributeValueMemberSS:
		return slices.Sorted(slices.Values(v.Value)), nil
	default:
		return nil, fmt.Errorf("attribute %s is %T, want a string set", name, v)
	}
}

func str(item map[string]types.AttributeValue, name string) (string, error) {
	switch v := item[name].(type) {
	case nil:
		return "", nil
	case *types.AttributeValueMemberS:
		return v.Value, nil
	default:
		return "", fmt.Errorf("attribute %s is %T, want a string", name, v)
	}
}

// integer reads a number attribute. Numbers written by other tools may have
// a fraction or an exponent ("1.7e9"); they are truncated.
func integer(item map[string]types.AttributeValue, name string) (int64, error) {
	switch v := item[name].(type) {
	case nil:
		return 0, nil
	case *types.AttributeValueMemberN:
		if n, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(v.Value, 64)
		if err != nil || math.IsNaN(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, fmt.Errorf("attribute %s = %q is not an integer", name, v.Value)
		}
		return int64(f), nil
	default:
		return 0, fmt.Errorf("attribute %s is %T, want a number", name, v)
	}
}

func unixTime(item map[string]types.AttributeValue, name string) (time.Time, error) {
	n, err := integer(item, name)
	if err != nil || n == 0 {
		return time.Time{}, err
	}
	return time.Unix(n, 0).UTC(), nil
}
