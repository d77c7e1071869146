// Package conformance runs APISIX's own test suite against linkgate
// gateway: the HTTP-visible cases of apache/apisix 2.14.1's t/ files and
// of 3.18.0's (run with --admin-api-version v3),
// re-expressed (never copied) as data in testdata/, run against the real
// `linkgate gateway` binary, started as users start it, with real upstream
// servers on 127.0.0.1 (Upstream: the server t/APISIX.pm puts on ports
// 1980–1983) and, for the redis cases, the test command's redis-server.
//
// # Case files
//
// One YAML file per APISIX .t file, testdata/<dir>/<name>.t.yaml, holding
// one case per TEST block, in order; the case named "routes.t:TEST 3" is
// TEST 3 of t/admin/routes.t. Adding a file needs no Go code: every
// *.t.yaml under testdata is run. The format:
//
//	source: t/admin/routes.t     # the APISIX file
//	tag: 3.18.0                  # optional: its release, 2.14.1 unless given (the
//	                             # 3.x files live under testdata/3.18.0)
//	args: [--admin-api-version, v3]  # optional: extra gateway flags for every case
//	skip: needs a TLS listener   # optional: the whole file is skipped, for this reason
//	port_servers: [1970, 1971]   # optional: servers answering their port number (a file's http_config ones)
//	store: etcd                  # optional: run on etcd (an embedded one), for files
//	                             # whose cases write to the store behind the admin API
//	cases:
//	  - test: 1                  # the TEST number
//	    name: set route(id: 1)   # its title
//	    skip: needs Lua (filter_func)  # not run; listed with the reason
//	    differs: ...             # run, and known to fail: a deliberate difference,
//	                             # listed in docs/gateway.md with the case name
//	    gap: ...                 # run, and known to fail: a behaviour linkgate does
//	                             # not have yet (not deliberate; counted apart)
//	    args: [--viewer-key, v]  # optional: the gateway restarts with these flags (same store)
//	    restart: true            # optional: start the case on a newly started gateway (same
//	                             # store), as Test::Nginx restarts nginx for every block:
//	                             # local counters (limit-count) start at zero
//	    steps:
//	      - req: PUT /apisix/admin/routes/1   # "GET /hello HTTP/1.0" sends HTTP/1.0
//	        headers: {Host: foo.com}
//	        body: |
//	          {"uri": "/hello", "upstream": {"type": "roundrobin",
//	           "nodes": {"127.0.0.1:1980": 1}}}
//	        want:
//	          status: 2xx        # a number, or 2xx/4xx/5xx
//	          body: "hello world\n"    # exact
//	          body_like: "^hello"      # a regular expression (Go syntax)
//	          json: {"node": {"value": {"uri": "/hello"}}}
//	          headers: {X-APISIX-Upstream-Status: "502", X-Gone: null}
//	          headers_like: {X-Request-Id: "^[0-9a-f-]+$"}
//	        repeat: 3            # send the same request 3 times, each must match
//	        range: [1, 106]      # or: once for each i in 1..106, ${i} in the request
//	        count: 12            # or: send it 12 times (${n}: 1..12) and count the bodies,
//	                             # want: {counts: {"1980": 6, "1981": 6}}
//	        concurrent: 10       # or: send it 10 times at once (capture_multi),
//	        statuses: [200, 200, 503, …]  # and these statuses come back, in any order
//	        unique: X-Request-Id # (optional) each answer has this header, with its own value
//	        bodies: [1980, 1981] # or: send it once per item; the bodies, trimmed, in order
//	        sorted: true         #   (or sorted, as Lua loops that table.sort what t() answered)
//	        timeout: 0.5         # the client's timeout, in seconds (10 by default);
//	                             # want: {no_answer: true} passes when it expires unanswered
//	        capture: {id: 'node.key =~ ^/apisix/routes/(.+)$'}  # saved as ${id} for later steps
//	        # (capture: {sign: body} saves the whole answer)
//	      - sleep: 1.1           # seconds; only where the case waits for time itself
//	      - etcd: {put: /routes/1, value: '{"uri": "/hello"}'}  # store: etcd only: write
//	                             # under the prefix, unchecked (delete: /routes/1 removes)
//	      - redis: [[CONFIG, SET, requirepass, foobared]]  # commands to the redis files'
//	                             # redis-server (a private one; those files run one at a time)
//
// More want fields: body_unlike (a regular expression the body must not
// match), has (dotted paths that must be in the JSON answer), json_eq with
// ignore (the whole JSON answer once the ignored paths are removed, as the
// Lua of many cases re-encodes it), ne (path → a JSON value the answer
// must no longer have there), and for a step with count: status_counts
// (how many answers had each status) and spread: {bodies: 3, max: 0.2}
// (that many distinct bodies, (most - fewest) / median at most max).
// ${name} in a request, body, header, json, json_eq, ne or body is a
// captured value; ${repeat:a:1024} in a request body is 1024 "a"s.
//
// A step's want fields are all optional; an omitted status means any. json
// is APISIX's test_admin subset match (lib/test_admin.lua com_tab): every
// key of the pattern must be in the answer with an equal value, objects
// and arrays compared key by key, so extra keys and extra array items in
// the answer are fine; null in the pattern means the key is absent. An
// admin call that APISIX's test expects to print "passed" is a 2xx whose
// body matches its pattern.
//
// # How requests are sent
//
// Each step is one raw HTTP/1.1 request on a new connection, as
// Test::Nginx sends it: "Host: localhost" unless the step sets Host,
// "Connection: close", a Content-Length when there is a body and no other
// header. Requests to /apisix/admin/ get "X-API-KEY: <the gateway's admin
// key>" and "Content-Type: application/x-www-form-urlencoded" (what
// lib/test_admin.lua sends) unless the step sets them; requests to
// /apisix/prometheus/metrics go to the gateway's --prometheus-listen and
// /v1/ to its --control-listen (APISIX serves both on the data port in its
// tests). Before a request that is not an admin call, the harness waits
// until the gateway has loaded every stored change (GET /v1/config
// in_sync) — APISIX's tests sleep instead.
//
// Addresses are written as APISIX's tests write them: 127.0.0.1:1980–1983
// is the test upstream, 127.0.0.1:1984 (or localhost:1984) the gateway
// itself, 127.0.0.1:6379 redis. The harness maps them to the real
// listeners in everything it sends (URIs, headers, bodies, and
// {"host": "127.0.0.1", "port": 1980} node objects) and maps the real port
// numbers back in everything it receives, so expectations read as in the
// .t file.
//
// # Result
//
// TestAPISIX prints a table per APISIX release, a row per file (TEST blocks, ported, pass,
// differs, skipped) and the overall pass rate (pass / ported), writes it
// to $LINKGATE_TEST_ARTIFACTS/conformance.md when that is set, and fails
// when a case that is expected to pass fails, or a case marked differs
// or gap passes (remove the mark). Skipped cases are listed with their reason in
// the -v output.
//
// tools/apisixt drafts case files from the .t files of a local APISIX
// checkout; every drafted case is checked by hand before it is committed.
// The tests never need APISIX's sources.
package conformance
