//go:build functiononly

package main

// Built with -tags functiononly (the Lambda bootstrap): no ACME or HTTPS
// listener is linked; a function is reached through Lambda's HTTPS.

import (
	"context"
	"errors"
	"log/slog"
	"net"

	"github.com/linkgate/linkgate/shortener/httpapi"
)

func startHTTPS(context.Context, *slog.Logger, serveConfig, *httpapi.Server, *httpapi.Handler, chan<- error) (net.Listener, func(), error) {
	return nil, nil, errors.New("this build has no HTTPS (built with -tags functiononly, as the Lambda bootstrap is); use --tls off")
}
