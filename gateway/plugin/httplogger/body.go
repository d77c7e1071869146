package httplogger

import (
	"bytes"
	"compress/gzip"
	"io"

	"github.com/linkgate/linkgate/gateway"
)

// bodyConf is what APISIX's log_util reads for the bodies in the log.
type bodyConf struct {
	IncludeReqBody      bool  `json:"include_req_body"`
	IncludeReqBodyExpr  []any `json:"include_req_body_expr"`
	IncludeRespBody     bool  `json:"include_resp_body"`
	IncludeRespBodyExpr []any `json:"include_resp_body_expr"`
	MaxReqBodyBytes     int   `json:"max_req_body_bytes"`
	MaxRespBodyBytes    int   `json:"max_resp_body_bytes"`
}

// bodyInstance is an instance that logs the request or response body
// (include_req_body, include_resp_body). Only such configurations have
// the access and header filter phases: the engine reads no body for the
// others. The bodies come from the engine (gateway.BodyCapture), bounded
// by max_req_body_bytes and max_resp_body_bytes; a streamed body still
// streams.
type bodyInstance struct {
	*instance
	req, resp         bool
	reqExpr, respExpr *gateway.Expr // nil: always
	maxReq, maxResp   int
}

var (
	_ gateway.Accessor     = (*bodyInstance)(nil)
	_ gateway.HeaderFilter = (*bodyInstance)(nil)
	_ gateway.Logger       = (*bodyInstance)(nil)
)

// Marks, in the request's value under the instance, of the bodies the
// expressions chose.
const (
	logReqBody = 1 << iota
	logRespBody
)

func newBodyInstance(in *instance, c bodyConf) (*bodyInstance, error) {
	b := &bodyInstance{instance: in, req: c.IncludeReqBody, resp: c.IncludeRespBody,
		maxReq: c.MaxReqBodyBytes, maxResp: c.MaxRespBodyBytes}
	var err error
	if c.IncludeReqBody && c.IncludeReqBodyExpr != nil {
		if b.reqExpr, err = gateway.ParseVars(c.IncludeReqBodyExpr); err != nil {
			return nil, err
		}
	}
	if c.IncludeRespBody && c.IncludeRespBodyExpr != nil {
		if b.respExpr, err = gateway.ParseVars(c.IncludeRespBodyExpr); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *bodyInstance) mark(c gateway.Ctx, bit int64) {
	v, _ := c.Value(b)
	c.SetValue(b, v|bit)
}

// Access reads the request body (as far as max_req_body_bytes) when
// include_req_body_expr matches, before it goes upstream: APISIX's
// log_util.check_and_read_req_body.
func (b *bodyInstance) Access(c gateway.Ctx) gateway.Reply {
	bc, ok := c.(gateway.BodyCapture)
	if !b.req || !ok || (b.reqExpr != nil && !b.reqExpr.Eval(c)) {
		return gateway.Reply{}
	}
	bc.RequestBody(b.maxReq)
	b.mark(c, logReqBody)
	return gateway.Reply{}
}

// FilterHeaders asks for the response body when include_resp_body_expr
// matches the answer, as APISIX's collect_body in the body filter.
func (b *bodyInstance) FilterHeaders(c gateway.Ctx) {
	bc, ok := c.(gateway.BodyCapture)
	if !b.resp || !ok || (b.respExpr != nil && !b.respExpr.Eval(c)) {
		return
	}
	bc.CaptureResponseBody(b.maxResp)
	b.mark(c, logRespBody)
}

// Log adds the bodies to the full log (request.body, response.body), as
// log_util.get_full_log; a log_format's entry has none.
func (b *bodyInstance) Log(c gateway.Ctx, e *gateway.LogEntry) {
	entry := b.entry(c, e)
	bc, ok := c.(gateway.BodyCapture)
	marks, _ := c.Value(b)
	if b.format == nil && ok && marks != 0 {
		if req, _ := entry["request"].(map[string]any); req != nil && marks&logReqBody != 0 {
			if body := bc.RequestBody(b.maxReq); body != nil {
				req["body"] = string(body)
			}
		}
		if resp, _ := entry["response"].(map[string]any); resp != nil && marks&logRespBody != 0 {
			body, enc := bc.ResponseBody()
			resp["body"] = string(decodeBody(body[:min(len(body), b.maxResp)], enc, b.maxResp))
		}
	}
	b.push(entry)
}

// decodeBody is APISIX's content_decode: a gzip body is logged decoded
// (at most max bytes of it); one that does not decode (cut short at max,
// or not gzip), or in another coding, is logged as it is.
func decodeBody(body []byte, encoding string, max int) []byte {
	if encoding != "gzip" || len(body) == 0 {
		return body
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return body
	}
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(zr, int64(max)+1))
	if err != nil {
		return body
	}
	if n > int64(max) {
		return out.Bytes()[:max]
	}
	return out.Bytes()
}
