// Command linkgate-bench-agent is linkgate bench's agent as an AWS Lambda
// function (runtime provided.al2023, this binary as bootstrap): every
// invocation is one request of the agent protocol (bench/agent) — the
// clock, or a step that it runs and answers with its raw histograms and
// per-second series. linkgate bench --agents lambda:FUNCTION:N invokes it
// N times at once. It is a separate function from the shortener's, which
// links no load generator (docs/lambda.md).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"

	"github.com/linkgate/linkgate/bench/agent"
)

// maxResponse is Lambda's limit on a synchronous invocation's response.
const maxResponse = 6 << 20

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	a := agent.NewAgent(logger, time.Now)
	awslambda.Start(func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		return handle(ctx, a, payload), nil
	})
}

// handle answers one invocation. A step that would end after the
// invocation's deadline is refused before it starts, and a report larger
// than Lambda's response limit is replaced by an error saying so.
func handle(ctx context.Context, a *agent.Agent, payload []byte) []byte {
	var req agent.Request
	if json.Unmarshal(payload, &req) == nil && req.Step != nil {
		end := req.Step.StartAt.Add(time.Duration(req.Step.Warmup + req.Step.Duration + req.Step.Timeout))
		if dl, ok := ctx.Deadline(); ok && end.After(dl) {
			return errorResponse(fmt.Sprintf("the step ends at %s, after this invocation's deadline %s: raise the function's timeout or cut the run into shorter steps (--agents-step)",
				end.Format(time.RFC3339), dl.Format(time.RFC3339)))
		}
	}
	out := a.ServeJSON(ctx, payload)
	if len(out) > maxResponse {
		return errorResponse(fmt.Sprintf("the report is %d bytes, more than Lambda's %d-byte response limit: cut the run into shorter steps (--agents-step)", len(out), maxResponse))
	}
	return out
}

func errorResponse(msg string) []byte {
	b, _ := json.Marshal(agent.Response{Version: agent.Version, Error: msg})
	return b
}
