package main

// The reference pages docs/<command>.md end with the index of each
// command's flags between generated markers; TestHelpDocs fails when they
// drift, and this rewrites them:
//
//go:generate go test -run ^TestHelpDocs$ . -args -update-docs
