package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/importer"
)

// Export, import and backup through the API (scope admin), for operating
// a running server: its store is locked to other processes.
//
//   - GET /api/v1/export?format=jsonl|csv streams every link with its
//     statistics, as `linkgate store export` writes them, from one
//     snapshot of the store where it has them (pebble).
//   - POST /api/v1/import reads a body of JSON Lines (what the export
//     writes) line by line as it arrives, and imports it in synced
//     batches as `linkgate store import` does: idempotent, a line that
//     is not a link or whose id holds another link reported with its
//     number, the others imported. Memory stays bounded whatever the
//     body's size: a line is at most importer.MaxLine, a batch at most
//     importBatch records and importBatchBytes of lines. The answer
//     streams too, as JSON Lines: one line per refused line, a summary
//     after each durable batch, and a last summary with "done": true —
//     an answer without it was cut short, and what its summaries counted
//     is durable. One import at a time per server.
//   - GET /api/v1/backup streams a consistent copy of the store as a tar
//     archive (pebble: a checkpoint), which opens as a store once
//     unpacked.
//
// These take the connection over (stream.go): each read and write has
// Config.StreamTimeout instead of the server's whole-request timeouts,
// so an import of any size that keeps sending is never cut off, and one
// that stalls is.

// DefaultStreamTimeout bounds each read and write of a streamed import,
// export or backup (Config.StreamTimeout).
const DefaultStreamTimeout = 30 * time.Second

// What an import holds at once: importBatch records, or fewer when
// their lines reach importBatchBytes.
const (
	importBatch      = 1000
	importBatchBytes = 4 << 20
)

const (
	contentTypeJSONLines = "application/x-ndjson"
	contentTypeCSV       = "text/csv; charset=utf-8"
	contentTypeTar       = "application/x-tar"
)

// ImportSummary counts what an import did with the lines it read.
type ImportSummary struct {
	Lines     int `json:"lines"`     // lines read (blank ones included)
	Imported  int `json:"imported"`  // stored
	Unchanged int `json:"unchanged"` // the same link was there already
	Conflicts int `json:"conflicts"` // another link holds the id: left as it is
	Invalid   int `json:"invalid"`   // not a link, or too long
}

// ImportLine is one line of an import's answer: a refused line (Line,
// Result, Message), or a summary (Summary, Done, Error).
type ImportLine struct {
	Line    int    `json:"line,omitempty"`
	ID      string `json:"id,omitempty"`
	Domain  string `json:"domain,omitempty"`
	Result  string `json:"result,omitempty"` // "conflict" or "invalid"
	Message string `json:"message,omitempty"`

	Summary *ImportSummary `json:"summary,omitempty"`
	Done    bool           `json:"done,omitempty"` // the last line of a complete import
	Error   *ErrorDetail   `json:"error,omitempty"`
}

// ErrorDetail is an error on the wire: a code and a message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// The results of a refused line.
const (
	ImportConflict = "conflict"
	ImportInvalid  = "invalid"
)

func (h *Handler) handleExport(ctx *fasthttp.RequestCtx) {
	if _, ok := h.authorize(ctx, shortener.ScopeAdmin); !ok {
		return
	}
	if h.cfg.Records == nil {
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "this server's store cannot export its links")
		return
	}
	format := importer.JSONL
	if f := ctx.QueryArgs().Peek("format"); f != nil {
		format = string(f)
	}
	ct := contentTypeJSONLines
	switch format {
	case importer.JSONL:
	case importer.CSV:
		ct = contentTypeCSV
	default:
		writeError(ctx, fasthttp.StatusBadRequest, string(shortener.InvalidParameter), "format must be jsonl or csv")
		return
	}
	start := time.Now()
	ok := hijack(ctx, h.streamTimeout, fasthttp.StatusOK, ct, func(_ io.Reader, w io.Writer) error {
		x, err := importer.NewWriter(format, w)
		if err == nil {
			err = h.cfg.Records.ExportRecords(context.Background(), x.Write)
		}
		if err == nil {
			err = x.Flush()
		}
		h.logTransfer("export", start, err, slog.Int("links", x.Count()))
		return err
	})
	if !ok {
		h.notStreamable(ctx)
	}
}

func (h *Handler) handleBackup(ctx *fasthttp.RequestCtx) {
	if _, ok := h.authorize(ctx, shortener.ScopeAdmin); !ok {
		return
	}
	if h.cfg.Backup == nil {
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "this server's store has no backups through the API (DynamoDB: use its own backups, or linkgate store export)")
		return
	}
	start := time.Now()
	ok := hijack(ctx, h.streamTimeout, fasthttp.StatusOK, contentTypeTar, func(_ io.Reader, w io.Writer) error {
		err := h.cfg.Backup(context.Background(), w)
		h.logTransfer("backup", start, err)
		return err
	})
	if !ok {
		h.notStreamable(ctx)
	}
}

func (h *Handler) handleImport(ctx *fasthttp.RequestCtx) {
	if _, ok := h.authorize(ctx, shortener.ScopeAdmin); !ok {
		return
	}
	if h.cfg.Records == nil {
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "this server's store cannot import links")
		return
	}
	if !h.importing.TryLock() {
		writeError(ctx, fasthttp.StatusConflict, codeImportRunning, "an import is running on this server: wait for it to end")
		return
	}
	ok := hijack(ctx, h.streamTimeout, fasthttp.StatusOK, contentTypeJSONLines, func(body io.Reader, w io.Writer) error {
		defer h.importing.Unlock()
		return h.runImport(body, w)
	})
	if !ok {
		// Through the http.Handler adapter the body was read whole
		// already (at most MaxBodyBytes): answer at once.
		defer h.importing.Unlock()
		var out bytes.Buffer
		h.runImport(bytes.NewReader(ctx.PostBody()), &out)
		ctx.Response.Header.SetContentType(contentTypeJSONLines)
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetBody(out.Bytes())
	}
}

// notStreamable answers a streamed route that came through the
// http.Handler adapter (Lambda), which buffers whole answers.
func (h *Handler) notStreamable(ctx *fasthttp.RequestCtx) {
	writeError(ctx, fasthttp.StatusNotImplemented, codeNotStreamable,
		"this route streams its answer, which this deployment (Lambda) cannot: run linkgate store export|backup against the store")
}

func (h *Handler) logTransfer(what string, start time.Time, err error, attrs ...slog.Attr) {
	attrs = append(attrs, slog.String("duration", time.Since(start).Round(time.Millisecond).String()))
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
		h.logger.LogAttrs(context.Background(), slog.LevelWarn, what+" cut short", attrs...)
		return
	}
	h.logger.LogAttrs(context.Background(), slog.LevelInfo, what+" done", attrs...)
}

// pendingLine is a line read and not yet imported.
type pendingLine struct {
	line int
	rec  shortener.LinkRecord
}

// runImport imports the JSON Lines of body and writes its answer to w.
// It returns an error only when the answer could not be written.
func (h *Handler) runImport(body io.Reader, w io.Writer) error {
	start := time.Now()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var sum ImportSummary
	batch := make([]pendingLine, 0, importBatch)
	batchBytes := 0
	refuse := func(line int, id, result, msg string) error {
		l := ImportLine{Line: line, Result: result, Message: msg}
		if id != "" {
			l.Domain, l.ID = shortener.SplitKey(id)
		}
		return enc.Encode(l)
	}
	var writeErr error // the client is gone: stop
	store := func() error {
		if len(batch) == 0 {
			return nil
		}
		recs := make([]shortener.LinkRecord, len(batch))
		for i := range batch {
			recs[i] = batch[i].rec
		}
		tctx, cancel := context.WithTimeout(context.Background(), h.streamTimeout)
		defer cancel()
		res, err := h.cfg.Records.ImportRecords(tctx, recs)
		// A record the store cannot keep was refused with nothing written:
		// its line is reported, the others imported without it.
		for re := (*shortener.RecordError)(nil); errors.As(err, &re) && re.Index >= 0 && re.Index < len(recs); {
			sum.Invalid++
			if writeErr = refuse(batch[re.Index].line, recs[re.Index].Link.ID, ImportInvalid, re.Err.Error()); writeErr != nil {
				return writeErr
			}
			recs = slices.Delete(recs, re.Index, re.Index+1)
			batch = slices.Delete(batch, re.Index, re.Index+1)
			res, err = h.cfg.Records.ImportRecords(tctx, recs)
		}
		if err != nil {
			return &storeError{err}
		}
		for i, r := range res {
			switch r {
			case shortener.Imported:
				sum.Imported++
			case shortener.Unchanged:
				sum.Unchanged++
			default:
				sum.Conflicts++
				_, id := shortener.SplitKey(batch[i].rec.Link.ID)
				if writeErr = refuse(batch[i].line, batch[i].rec.Link.ID, ImportConflict, "another link holds the id "+id+"; left as it is"); writeErr != nil {
					return writeErr
				}
			}
		}
		batch, batchBytes = batch[:0], 0
		progress := sum
		if writeErr = enc.Encode(ImportLine{Summary: &progress}); writeErr == nil {
			writeErr = flush(w)
		}
		return writeErr
	}
	err := importer.Lines(body, func(n int, b []byte, err error) error {
		sum.Lines = n
		if err != nil {
			sum.Invalid++
			writeErr = refuse(n, "", ImportInvalid, err.Error())
			return writeErr
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil
		}
		rec, err := importer.ParseJSONLine(b)
		if err != nil {
			sum.Invalid++
			writeErr = refuse(n, rec.Link.ID, ImportInvalid, err.Error())
			return writeErr
		}
		batch = append(batch, pendingLine{line: n, rec: rec})
		batchBytes += len(b)
		if len(batch) == importBatch || batchBytes >= importBatchBytes {
			return store()
		}
		return nil
	})
	// The lines read whole are imported also when the body ended early (a
	// stall, a cut): the summary counts them.
	if se := (*storeError)(nil); writeErr == nil && !errors.As(err, &se) {
		if serr := store(); serr != nil {
			err = serr
		}
	}
	if writeErr != nil {
		h.logTransfer("import", start, writeErr, slog.Int("lines", sum.Lines), slog.Int("imported", sum.Imported))
		return writeErr
	}
	last := ImportLine{Summary: &sum, Done: err == nil}
	if err != nil {
		last.Error = importError(err)
	}
	h.logTransfer("import", start, err, slog.Int("lines", sum.Lines), slog.Int("imported", sum.Imported),
		slog.Int("unchanged", sum.Unchanged), slog.Int("conflicts", sum.Conflicts), slog.Int("invalid", sum.Invalid))
	if err := enc.Encode(last); err != nil {
		return err
	}
	return nil
}

// storeError is an error of the store during an import.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// importError is the error that ended an import: reading its body
// (stalled past the stream timeout, cut) or storing a batch.
func importError(err error) *ErrorDetail {
	const again = "; the lines the summary counts are imported: run the import again for the rest"
	var netErr net.Error
	var se *storeError
	switch {
	case errors.As(err, &se):
		_, code := statusOf(se.err)
		return &ErrorDetail{Code: code, Message: "the store failed: " + shortener.ErrorMessage(se.err) + again}
	case errors.As(err, &netErr) && netErr.Timeout():
		return &ErrorDetail{Code: codeRequestTimeout, Message: "no part of the body arrived within the stream timeout" + again}
	}
	return &ErrorDetail{Code: codeBadRequest, Message: fmt.Sprintf("the body could not be read: %v%s", err, again)}
}
