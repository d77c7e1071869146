// Package shortener is linkgate's URL-shortener domain: the Link, how ids
// and custom slugs look, which target URLs are acceptable, the Store every
// storage adapter implements, the error kinds, and the Service that ties
// them together (validation, id generation with conflict retry, expiry and
// visit-limit enforcement).
//
// It imports only the standard library, and golang.org/x/net/idna and
// golang.org/x/text to map host names (deps_test.go holds it to that).
// Storage adapters live in subpackages named after their dependency
// (pebble, dynamodb; bolt only reads a store of earlier releases to
// migrate it); the HTTP API lives in httpapi; every Store passes
// storetest.Run.
package shortener
