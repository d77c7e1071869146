package main

// The reference pages docs/<command>.md carry each command's `linkgate help`
// text between generated markers; TestHelpDocs fails when they drift, and
// this rewrites them:
//
//go:generate go test -run ^TestHelpDocs$ . -args -update-docs
