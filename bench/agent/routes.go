package agent

import (
	"log/slog"
	"net/http"
)

// routes lists the agent's whole HTTP API. Every route needs the token.
func routes(mux *http.ServeMux, a *Agent, logger *slog.Logger) {
	mux.Handle("POST /v1/clock", handleRequest(a, logger, KindClock))
	mux.Handle("POST /v1/run", handleRequest(a, logger, KindRun))
	mux.Handle("/", handleNotFound())
}
