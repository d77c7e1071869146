// Package lambda reaches linkgate bench agents running as AWS Lambda
// functions (cmd/linkgate-bench-agent) through the Lambda Invoke API: one
// synchronous invocation per request of the agent protocol, the request
// as the payload and the response as the function's result.
package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	sdk "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/linkgate/linkgate/bench/agent"
)

// Invoker is one of N concurrent invocations of the agent function.
type Invoker struct {
	client   *sdk.Client
	function string
	name     string
}

var _ agent.Remote = (*Invoker)(nil)

// Remotes returns n invokers of function, named FUNCTION#1 … FUNCTION#n:
// a distributed run invokes them all at once, so Lambda runs n execution
// environments, each with its share of the rate.
func Remotes(client *sdk.Client, function string, n int) []agent.Remote {
	rs := make([]agent.Remote, n)
	for i := range rs {
		rs[i] = &Invoker{client: client, function: function, name: function + "#" + strconv.Itoa(i+1)}
	}
	return rs
}

// Name is the invocation's name in reports.
func (v *Invoker) Name() string { return v.name }

// Do invokes the function with req and decodes its response. It is never
// retried: a step invoked twice would run twice.
func (v *Invoker) Do(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	var payload bytes.Buffer
	if err := agent.Encode(&payload, req); err != nil {
		return nil, err
	}
	out, err := v.client.Invoke(ctx, &sdk.InvokeInput{
		FunctionName: aws.String(v.function), InvocationType: types.InvocationTypeRequestResponse, Payload: payload.Bytes(),
	}, func(o *sdk.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", v.function, err)
	}
	if out.FunctionError != nil {
		var fe struct{ ErrorMessage, ErrorType string }
		_ = json.Unmarshal(out.Payload, &fe)
		return nil, fmt.Errorf("invoke %s: %s: %s %s", v.function, *out.FunctionError, fe.ErrorType, fe.ErrorMessage)
	}
	if len(out.Payload) == 0 {
		return nil, errors.New("an empty response")
	}
	return agent.DecodeResponse(bytes.NewReader(out.Payload))
}

// NewClient returns a Lambda client from the default AWS configuration
// (environment, shared files, instance role); a non-empty endpoint
// overrides the service's (a test's emulator, LocalStack).
func NewClient(ctx context.Context, endpoint string) (*sdk.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	return sdk.NewFromConfig(cfg, func(o *sdk.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}
