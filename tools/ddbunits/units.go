package main

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB Local reports ConsumedCapacity as DynamoDB does for every
// request that succeeds (TestMeterAgainstDynamoDBLocal checks it against
// the rules below), but not for two things DynamoDB bills:
//
//   - A conditional write refused by its condition. DynamoDB bills it as
//     the write would have been: the larger of the existing item and the
//     new one, rounded up to 1 KB, at least one unit; twice that for each
//     action of a cancelled transaction (transactional writes cost double;
//     that a cancelled transaction is billed in full is our reading, an
//     upper bound). The meter asks for the existing item
//     (ReturnValuesOnConditionCheckFailure: ALL_OLD) to size it.
//   - Keys a BatchGetItem asked for and did not find: DynamoDB bills a read
//     of a missing item as the smallest read (half a unit eventually
//     consistent, one strongly consistent); DynamoDB Local reports nothing
//     for them in a batch (it does for GetItem).
//
// The rules are those of the DynamoDB Developer Guide ("Capacity unit
// consumption for read and write operations", "Item sizes and formats").

// writeUnits is the write units of a write of an item of n bytes: 1 per KB,
// rounded up, at least 1.
func writeUnits(n int) float64 {
	return max(1, math.Ceil(float64(n)/1024))
}

// readUnits is the read units of a read of an item of n bytes: 1 per 4 KB,
// rounded up, at least one; half of that eventually consistent.
func readUnits(n int, consistent bool) float64 {
	u := max(1, math.Ceil(float64(n)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// itemSize is the size of an item in DynamoDB JSON by DynamoDB's rules:
// the UTF-8 length of every attribute name plus the size of its value.
// Unparsable input counts 0.
func itemSize(raw json.RawMessage) int {
	var item map[string]json.RawMessage
	if json.Unmarshal(raw, &item) != nil {
		return 0
	}
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is the size of one attribute value in DynamoDB JSON: strings by
// their UTF-8 bytes, binary by its bytes, numbers one byte per two
// significant digits plus one, booleans and nulls one byte, lists and maps
// 3 bytes plus one per element plus their elements (and a map's names),
// sets the sum of their elements.
func valueSize(raw json.RawMessage) int {
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return 0
	}
	for typ, x := range v {
		switch typ {
		case "S":
			var s string
			json.Unmarshal(x, &s)
			return len(s)
		case "N":
			var s string
			json.Unmarshal(x, &s)
			return numberSize(s)
		case "B":
			var b []byte // base64 in JSON
			json.Unmarshal(x, &b)
			return len(b)
		case "BOOL", "NULL":
			return 1
		case "SS", "NS", "BS":
			var set []string
			json.Unmarshal(x, &set)
			n := 0
			for _, e := range set {
				switch typ {
				case "SS":
					n += len(e)
				case "NS":
					n += numberSize(e)
				default:
					n += base64.StdEncoding.DecodedLen(len(e)) - strings.Count(e, "=")
				}
			}
			return n
		case "L":
			var l []json.RawMessage
			json.Unmarshal(x, &l)
			n := 3 + len(l)
			for _, e := range l {
				n += valueSize(e)
			}
			return n
		case "M":
			var m map[string]json.RawMessage
			json.Unmarshal(x, &m)
			n := 3 + len(m)
			for k, e := range m {
				n += len(k) + valueSize(e)
			}
			return n
		}
	}
	return 0
}

// numberSize is the size of a number: its significant digits (leading and
// trailing zeros dropped), one byte per two, plus one.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.Trim(strings.Replace(s, ".", "", 1), "0")
	return (len(digits)+1)/2 + 1
}

// batchRead is what a BatchGetItem asked of one table.
type batchRead struct {
	Keys       int
	Consistent bool
}

// sizes returns what the units DynamoDB Local does not report are
// computed from: the sizes of the items a PutItem or each action of a
// TransactWriteItems puts, and the keys a BatchGetItem asks for.
func sizes(op string, req map[string]json.RawMessage) ([]int, map[string]batchRead) {
	switch op {
	case "PutItem":
		return []int{itemSize(req["Item"])}, nil
	case "TransactWriteItems":
		var actions []map[string]struct{ Item json.RawMessage }
		json.Unmarshal(req["TransactItems"], &actions)
		out := make([]int, len(actions))
		for i, a := range actions {
			if p, ok := a["Put"]; ok {
				out[i] = itemSize(p.Item)
			}
		}
		return out, nil
	case "BatchGetItem":
		var tables map[string]struct {
			Keys           []json.RawMessage
			ConsistentRead bool
		}
		json.Unmarshal(req["RequestItems"], &tables)
		out := map[string]batchRead{}
		for name, t := range tables {
			out[name] = batchRead{len(t.Keys), t.ConsistentRead}
		}
		return nil, out
	}
	return nil, nil
}

// askOldItems makes a conditional write return the existing item when its
// condition fails (ReturnValuesOnConditionCheckFailure: ALL_OLD), so that
// refused can size it. The caller ignores the item; linkgate never asks
// for it.
func askOldItems(op string, req map[string]json.RawMessage) {
	allOld := json.RawMessage(`"ALL_OLD"`)
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		if _, ok := req["ConditionExpression"]; ok {
			req["ReturnValuesOnConditionCheckFailure"] = allOld
		}
	case "TransactWriteItems":
		var actions []map[string]map[string]json.RawMessage
		if json.Unmarshal(req["TransactItems"], &actions) != nil {
			return
		}
		for _, a := range actions {
			for _, body := range a {
				if _, ok := body["ConditionExpression"]; ok {
					body["ReturnValuesOnConditionCheckFailure"] = allOld
				}
			}
		}
		if b, err := json.Marshal(actions); err == nil {
			req["TransactItems"] = b
		}
	}
}

// refused returns the write units DynamoDB bills for a conditional write
// it refused, from the error answer (which holds the existing items).
func (k requestInfo) refused(body []byte) float64 {
	var e struct {
		Item                json.RawMessage
		CancellationReasons []struct {
			Item json.RawMessage
		}
	}
	json.Unmarshal(body, &e)
	if k.Op != "TransactWriteItems" {
		n := itemSize(e.Item)
		if len(k.Sizes) > 0 {
			n = max(n, k.Sizes[0])
		}
		return writeUnits(n)
	}
	units := 0.0
	for i, r := range e.CancellationReasons {
		n := itemSize(r.Item)
		if i < len(k.Sizes) {
			n = max(n, k.Sizes[i])
		}
		units += 2 * writeUnits(n)
	}
	return units
}

// unreported returns the read units DynamoDB bills for a successful answer
// and DynamoDB Local did not report: the keys of a BatchGetItem neither
// found nor left unprocessed, each the smallest read.
func (k requestInfo) unreported(body []byte) float64 {
	if k.Op != "BatchGetItem" {
		return 0
	}
	var r struct {
		Responses       map[string][]json.RawMessage
		UnprocessedKeys map[string]struct{ Keys []json.RawMessage }
	}
	if json.Unmarshal(body, &r) != nil {
		return 0
	}
	units := 0.0
	for table, asked := range k.Reads {
		missing := asked.Keys - len(r.Responses[table]) - len(r.UnprocessedKeys[table].Keys)
		units += float64(max(missing, 0)) * readUnits(0, asked.Consistent)
	}
	return units
}

// itemBytes is the size of an item by DynamoDB's rules (itemSize).
func itemBytes(item map[string]types.AttributeValue) int {
	out := map[string]any{}
	for k, v := range item {
		out[k] = jsonValue(v)
	}
	b, _ := json.Marshal(out)
	return itemSize(b)
}

// jsonValue is v in DynamoDB JSON, as the SDK sends it.
func jsonValue(v types.AttributeValue) any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *types.AttributeValueMemberBS:
		return map[string]any{"BS": v.Value}
	case *types.AttributeValueMemberL:
		l := []any{}
		for _, e := range v.Value {
			l = append(l, jsonValue(e))
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		m := map[string]any{}
		for k, e := range v.Value {
			m[k] = jsonValue(e)
		}
		return map[string]any{"M": m}
	}
	return nil
}
