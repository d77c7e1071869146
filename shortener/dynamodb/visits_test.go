package dynamodb_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/dynamodb"
)

// Visits of a link the seed's app wrote are counted on its item with ADD;
// the item stays readable by the seed's app (shortURL and originalURL
// untouched) and gains a numeric visits attribute.
func TestVisitsOnSeedItem(t *testing.T) {
	s := newStore(t, dynamodb.Options{ConsistentReads: true})
	ctx := context.Background()
	av, err := attributevalue.MarshalMap(seedItem{"SeedVisit1", "https://aws.amazon.com/ec2/graviton/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().PutItem(ctx, &ddb.PutItemInput{TableName: aws.String(s.Table()), Item: av}); err != nil {
		t.Fatal(err)
	}
	delta := func(n int64) *shortener.VisitBatch {
		return shortener.NewVisitBatch(shortener.VisitDelta{ID: "SeedVisit1", Stats: shortener.VisitStats{Total: n, Bots: 1,
			Days: shortener.Breakdown{"2026-03-14": n}, Referrers: shortener.Breakdown{"news.example.com": n},
			Browsers: shortener.Breakdown{"Firefox": n - 1}, BotAgents: shortener.Breakdown{"Slack": 1}}})
	}
	for _, n := range []int64{3, 4} {
		b := delta(n)
		if err := s.AddVisits(ctx, b); err != nil || !b.Links[0].Applied {
			t.Fatalf("AddVisits: %v (applied %v)", err, b.Links[0].Applied)
		}
	}
	out, err := s.Client().GetItem(ctx, &ddb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
		"shortURL": &types.AttributeValueMemberS{Value: "SeedVisit1"}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var seed seedItem
	if err := attributevalue.UnmarshalMap(out.Item, &seed); err != nil || seed.OriginalURL != "https://aws.amazon.com/ec2/graviton/" {
		t.Errorf("seed's view of the item: %+v, %v", seed, err)
	}
	if v, ok := out.Item["visits"].(*types.AttributeValueMemberN); !ok || v.Value != "7" {
		t.Errorf("visits attribute = %#v, want N 7", out.Item["visits"])
	}
	st, err := s.VisitStats(ctx, "SeedVisit1")
	if err != nil || st.Total != 7 || st.Bots != 2 || st.Referrers["news.example.com"] != 7 || st.Browsers["Firefox"] != 5 || st.Days["2026-03-14"] != 7 {
		t.Errorf("stats %+v, %v", st, err)
	}
	// A deleted link's visits are dropped, not written as a new item.
	if err := s.Delete(ctx, "SeedVisit1"); err != nil {
		t.Fatal(err)
	}
	b := delta(2)
	if err := s.AddVisits(ctx, b); err != nil || !b.Links[0].Applied {
		t.Fatalf("AddVisits after delete: %v", err)
	}
	if out, _ := s.Client().GetItem(ctx, &ddb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
		"shortURL": &types.AttributeValueMemberS{Value: "SeedVisit1"}}, ConsistentRead: aws.Bool(true)}); out.Item != nil {
		t.Errorf("visits of a deleted link created an item: %v", out.Item)
	}
}
