package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// MinTokenBytes is the shortest shared token an agent accepts: it is all
// that stands between the network and a load generator.
const MinTokenBytes = 16

// ClockTimeout bounds a clock request; a run request may take until its
// step ends plus RunSlack (preparing a scenario's links, the report).
const (
	ClockTimeout = 10 * time.Second
	RunSlack     = 2 * time.Minute
)

// NewHandler serves the protocol over HTTP for requests that carry the
// shared token as "Authorization: Bearer TOKEN"; anything else is a 401.
// An empty or short token is refused: an agent never listens without one.
func NewHandler(a *Agent, token string, logger *slog.Logger) (http.Handler, error) {
	if len(token) < MinTokenBytes {
		return nil, fmt.Errorf("the agent's token must be at least %d bytes", MinTokenBytes)
	}
	mux := http.NewServeMux()
	routes(mux, a, logger)
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			writeError(w, http.StatusUnauthorized, "a valid Authorization: Bearer token is needed")
			return
		}
		mux.ServeHTTP(w, r)
	}), nil
}

func handleNotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: POST /v1/clock and /v1/run are the agent's API")
	})
}

// handleRequest decodes one request of kind, serves it and maps its error
// to a status code.
func handleRequest(a *Agent, logger *slog.Logger, kind string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(ClockTimeout))
		req, err := DecodeRequest(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) || strings.Contains(err.Error(), "larger than") {
				writeError(w, http.StatusRequestEntityTooLarge, err.Error())
				return
			}
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if req.Kind != kind {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("a %s request on the %s endpoint", req.Kind, kind))
			return
		}
		timeout := ClockTimeout
		if req.Step != nil {
			timeout = time.Until(req.Step.StartAt) + time.Duration(req.Step.Warmup+req.Step.Duration+req.Step.Timeout) + RunSlack
		}
		_ = rc.SetWriteDeadline(time.Now().Add(timeout))
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		resp, err := a.Serve(ctx, req)
		if err != nil {
			status := http.StatusInternalServerError
			switch {
			case errors.Is(err, ErrBusy):
				status = http.StatusConflict
			case errors.Is(err, ErrLateStart):
				status = http.StatusUnprocessableEntity
			case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
				status = http.StatusServiceUnavailable
			}
			logger.LogAttrs(r.Context(), slog.LevelWarn, "request failed", slog.String("kind", kind), slog.Int("status", status), slog.Any("err", err))
			writeError(w, status, err.Error())
			return
		}
		writeResponse(w, http.StatusOK, resp)
	})
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeResponse(w, status, &Response{Version: Version, Error: msg})
}

func writeResponse(w http.ResponseWriter, status int, resp *Response) {
	var b bytes.Buffer
	_ = Encode(&b, resp)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(b.Len()))
	w.WriteHeader(status)
	_, _ = io.Copy(w, &b)
}
