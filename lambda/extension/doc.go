// Package extension is linkgate's AWS Lambda extension: a client of the
// Extensions API (register, the /event/next loop, init and exit errors), a
// Telemetry API subscriber and listener, and the in-memory metrics it writes
// as CloudWatch Embedded Metric Format lines.
//
// It is built for an extension that costs the function nothing measurable:
// it imports only the standard library and not net/http (the stripped
// binary stays under 3 MB), reads both APIs with a minimal HTTP/1.1 reader
// and an allocation-free JSON reader (fuzzed against encoding/json), does
// no work on INVOKE beyond noting the time, and never waits for telemetry
// before asking for the next event. Run is the whole extension;
// cmd/linkgate-extension wires it to the environment.
package extension
