package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// createTableOnly are the DynamoDB operations only `linkgate dynamodb
// create-table` calls; in the templates CloudFormation creates the table.
var createTableOnly = []string{"CreateTable", "DeleteTable", "DescribeTimeToLive", "UpdateTimeToLive"}

// transactActions are the IAM actions a TransactWriteItems needs, by the
// kind of its actions: TransactWriteItems is no IAM action of its own.
var transactActions = map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}

// certStorage is the store's certificate storage for `serve --tls auto`
// (its own table, TABLE-certs): the templates end TLS before linkgate (the
// ECS template's load balancer with an ACM certificate, Lambda's function
// URL or API), so their roles need none of its calls.
const certStorage = "certs.go"

// storeActions returns the IAM actions linkgate's DynamoDB store needs to
// serve: every operation of the AWS SDK's DynamoDB client that its source
// calls, the actions inside its transactions, less create-table's.
func storeActions(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../shortener/dynamodb/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the store's source: %v", err)
	}
	ops := map[string]bool{}
	client := reflect.TypeOf(&ddb.Client{})
	for i := range client.NumMethod() {
		// An operation takes (ctx, *<Name>Input, …optFns).
		m := client.Method(i)
		if m.Type.NumIn() >= 3 && m.Type.In(2).String() == "*dynamodb."+m.Name+"Input" {
			ops[m.Name] = true
		}
	}
	need := map[string]bool{}
	call := regexp.MustCompile(`\bclient\.([A-Z][A-Za-z]+)\(`)
	action := regexp.MustCompile(`\btypes\.(Put|Update|Delete|ConditionCheck)\{`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || filepath.Base(f) == certStorage {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			if ops[m[1]] && !slices.Contains(createTableOnly, m[1]) {
				need[m[1]] = true
			}
		}
		for _, m := range action.FindAllStringSubmatch(string(src), -1) {
			need[transactActions[m[1]]] = true
		}
	}
	delete(need, "TransactWriteItems") // its actions' are above
	var out []string
	for a := range need {
		out = append(out, "dynamodb:"+a)
	}
	slices.Sort(out)
	return out
}

// The role each AWS template gives linkgate allows every DynamoDB call
// the store makes: a missing one shows only on AWS, as AccessDenied on the
// calls that need it (the visit log's BatchWriteItem, say).
func TestTemplatesAllowTheStoresCalls(t *testing.T) {
	need := storeActions(t)
	for _, a := range []string{"dynamodb:GetItem", "dynamodb:BatchWriteItem", "dynamodb:PutItem"} {
		if !slices.Contains(need, a) {
			t.Fatalf("the store's calls %v lack %s: the scan of its source is broken", need, a)
		}
	}
	for _, file := range templates {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		allowed := regexp.MustCompile(`(?m)^\s*-\s*(dynamodb:[A-Za-z]+)\s*$`).FindAllStringSubmatch(string(data), -1)
		var got []string
		for _, m := range allowed {
			got = append(got, m[1])
		}
		for _, a := range need {
			if !slices.Contains(got, a) {
				t.Errorf("%s: the role does not allow %s, which linkgate's DynamoDB store calls (allowed: %v)", file, a, got)
			}
		}
	}
}
