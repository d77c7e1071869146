package shortener

import (
	"context"
	"errors"
	"fmt"
)

// Code names a kind of failure. HTTP adapters map each code to one status
// and one wire error code, in one place.
type Code string

// Error codes. Validation codes name exactly what was wrong with the input.
const (
	Internal         Code = "internal"           // a bug or an unexpected failure
	Unavailable      Code = "unavailable"        // the store did not answer, or ids ran out of retries
	NotFound         Code = "not_found"          // no link under that id
	Conflict         Code = "conflict"           // the id (or custom slug) is taken
	Expired          Code = "expired"            // the link expired or reached its visit limit
	InvalidURL       Code = "invalid_url"        // not an absolute URL with a host, or contains control characters/whitespace
	URLTooLong       Code = "url_too_long"       // longer than the configured maximum
	SchemeNotAllowed Code = "scheme_not_allowed" // scheme not in the allow-list
	SelfReference    Code = "self_reference"     // the URL points at this service
	BlockedDomain    Code = "blocked_domain"     // the host is on the blocklist
	InvalidSlug      Code = "invalid_slug"       // custom slug malformed or reserved
	InvalidParameter Code = "invalid_parameter"  // another field or parameter out of range (expiry, visit limit, page size, cursor)
)

// Error is a domain error: a Code plus a message meant for the API client.
// Err, if set, is the underlying cause (for logs, never shown to clients).
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string {
	switch {
	case e.Err != nil && e.Message != "":
		return e.Message + ": " + e.Err.Error()
	case e.Err != nil:
		return string(e.Code) + ": " + e.Err.Error()
	case e.Message != "":
		return e.Message
	}
	return string(e.Code)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) true for every *Error with the same
// Code, whatever its message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is. Adapters return errors that match these (either
// the sentinel itself, wrapped with %w, or an *Error with the same Code).
var (
	ErrNotFound    = &Error{Code: NotFound, Message: "link not found"}
	ErrConflict    = &Error{Code: Conflict, Message: "id already taken"}
	ErrExpired     = &Error{Code: Expired, Message: "link expired"}
	ErrUnavailable = &Error{Code: Unavailable, Message: "store unavailable"}
)

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Code of the first *Error in err's chain. Context
// cancellation and deadlines count as Unavailable; anything else unknown is
// Internal. nil has no code ("").
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Unavailable
	}
	return Internal
}

// ErrorMessage returns the client-facing message of err: the Message of its
// first *Error, or a generic text for anything else (internal details are
// never shown to clients).
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	switch ErrorCode(err) {
	case Unavailable:
		return "store unavailable, retry later"
	default:
		return "internal error"
	}
}
