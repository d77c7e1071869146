package agent

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Client reaches a linkgate bench agent over HTTP (or HTTPS with mutual
// TLS, as its HTTP client is configured).
type Client struct {
	name  string
	base  string // http(s)://host:port
	token string
	hc    *http.Client
}

var _ Remote = (*Client)(nil)

// NewClient returns the client of the agent at base (http://host:port or
// https://host:port) with the shared token, named name in reports.
func NewClient(name, base, token string, hc *http.Client) *Client {
	return &Client{name: name, base: strings.TrimSuffix(base, "/"), token: token, hc: hc}
}

// Name is the agent's name in reports.
func (c *Client) Name() string { return c.name }

// Do sends req to the agent's endpoint for its kind and decodes the
// answer; an error status's JSON body is the error's text.
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	var body bytes.Buffer
	if err := Encode(&body, req); err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/"+req.Kind, &body)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r, err := DecodeResponse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, r.Error)
	}
	return r, nil
}
