#!/usr/bin/env bash
# make bench-abuse: do redirects survive a flood of creates? (issue 13 §5;
# docs/security.md, "Nobody can hurt everyone else")
#
#  - linkgate serve on SERVER_CPU with GOMAXPROCS=1 and its default
#    in-flight budgets (--max-inflight-creates 256 among them), a fresh
#    store in a temporary directory, no rate limits: the budgets alone;
#  - its create capacity first: wrk closed loop on POST /shortenURL with a
#    unique URL per request (scripts/bench/create.lua), -c$CONNS, 1 round;
#  - then ROUNDS rounds, interleaved, of redirects of one link at a
#    constant REDIRECT_RATE (linkgate bench -R, latencies corrected for
#    coordinated omission) with (flooded) and without (quiet) a create
#    flood of 10× that capacity from FLOOD_CONNS connections running
#    through the whole measurement; generators on LOAD_CPU, the floods'
#    at nice 19, so that the redirects' generator, which measures, gets
#    that CPU when it needs it (its own send lag is printed);
#  - and during a QR flood: QR_CONNS clients asking for 2048-pixel QR
#    codes of the link closed-loop (the issue's 16 such clients);
#  - the floods again against a second server started with BEFORE_ARGS
#    (default --overload-rate=false: the mechanism before the adaptive
#    admission rate), or built from BEFORE_REF (then BEFORE_ARGS defaults
#    to none), interleaved with the others, so each change shows as
#    before/after in one run;
#  - figures: redirect p50, p99 and p99.9 in each, the ratios, and the
#    share of redirects that failed (socket errors or status ≥ 400).
# Targets (issue 13): ≥ 99.9 % of redirects succeed during the flood, and
# their p99 stays within 2× the quiet one.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
REDIRECT_RATE=${REDIRECT_RATE:-2000}
FLOOD_CONNS=${FLOOD_CONNS:-256}
FLOOD_FACTOR=${FLOOD_FACTOR:-10}
QR_CONNS=${QR_CONNS:-16}
SERVE_ARGS=${SERVE_ARGS:-} # more linkgate serve flags, e.g. --max-inflight-creates 16
BEFORE_REF=${BEFORE_REF:-} # build the "before" server from this git ref (e.g. a457a86), with SERVE_ARGS and BEFORE_ARGS
if [ -n "$BEFORE_REF" ]; then
	BEFORE_ARGS=${BEFORE_ARGS:-}
else
	BEFORE_ARGS=${BEFORE_ARGS---overload-rate=false} # the "before" server's flags, after SERVE_ARGS; empty (without BEFORE_REF): no before server
fi

bench_workdir # $work, $pids: killed and removed on exit
step "build linkgate and benchcmp"
go build -trimpath -o "$work/linkgate" ./cmd/linkgate
benchcmp_build "$work"
before_bin=$work/linkgate
if [ -n "$BEFORE_REF" ]; then
	step "build linkgate at $BEFORE_REF (the before server)"
	mkdir "$work/before-src"
	git archive "$BEFORE_REF" | tar -x -C "$work/before-src"
	(cd "$work/before-src" && go build -trimpath -o "$work/linkgate-before" ./cmd/linkgate)
	before_bin=$work/linkgate-before
fi

exec 9>"$BENCH_LOCK"
step "waiting for $BENCH_LOCK"
flock 9
echo "server on CPU $SERVER_CPU (GOMAXPROCS=1); generators on CPU $LOAD_CPU; $ROUNDS rounds of $DURATION"

# serve NAME BINARY FLAGS… starts BINARY serve in $work/NAME (a fresh
# default store there), creates the link to redirect, and sets NAME_pid,
# NAME_url and NAME_id.
serve() {
	local name=$1 bin=$2 port id
	shift 2
	port=$(free_port)
	mkdir -p "$work/$name"
	(cd "$work/$name" && GOMAXPROCS=1 exec taskset -c "$SERVER_CPU" "$bin" serve --addr "127.0.0.1:$port" \
		--log-level warn "$@" >"$work/$name.log" 2>&1) &
	printf -v "${name}_pid" %s $!
	pids+=("$!")
	wait_tcp 127.0.0.1 "$port" 30 || die "linkgate ($name) did not start: $(cat "$work/$name.log")"
	printf -v "${name}_url" %s "http://127.0.0.1:$port"
	id=$(curl -sf -X POST "http://127.0.0.1:$port/shortenURL" -d '{"OriginalURL":"https://aws.amazon.com/ec2/graviton/"}' | sed -n 's/.*"shortURL": "\([^"]*\)".*/\1/p')
	[ -n "$id" ] || die "could not create the link to redirect ($name)"
	printf -v "${name}_id" %s "$id"
}
# shellcheck disable=SC2086 # the flags are words
serve after "$work/linkgate" $SERVE_ARGS
lg_pid=$after_pid url=$after_url id=$after_id
before_what="linkgate${BEFORE_REF:+ at $BEFORE_REF} serve $SERVE_ARGS $BEFORE_ARGS"
if [ -n "$BEFORE_REF$BEFORE_ARGS" ]; then
	# shellcheck disable=SC2086
	serve before "$before_bin" $SERVE_ARGS $BEFORE_ARGS
	echo "before: $before_what"
fi
res=$work/results.jsonl

step "create capacity: POST /shortenURL, closed loop"
measure "$res" -rounds 1 -target "capacity $url/shortenURL lua=scripts/bench/create.lua pid=$lg_pid prewarm=2s"
# Creates acknowledged (201) per second: answers shed with 503 are not capacity.
capacity=$("$benchcmp" report -t '{{printf "%.0f" (mul (med "capacity" "rps") (sub 1.0 (failed "capacity")))}}' "$res")
flood=$((capacity * FLOOD_FACTOR))
flood_secs=$(( ${DURATION%s} + 6 ))
echo "create capacity ${capacity}/s; the flood: ${flood}/s (${FLOOD_FACTOR}×) from $FLOOD_CONNS connections"

step "redirects at ${REDIRECT_RATE}/s: quiet, during the create flood, during the QR flood; rounds interleaved"
# Each flood starts before its run and outlasts it (the warm-up included);
# its own figures are only summed up below.
# flood_targets SUFFIX URL ID PID: the two floods' targets against one server.
flood_targets() {
	local sfx=$1 u=$2 i=$3 p=$4
	targets+=(-target "flooded$sfx $u/$i gen=linkgate R=$REDIRECT_RATE c=32 pid=$p warmup=2s"
		-target "qrflood$sfx $u/$i gen=linkgate R=$REDIRECT_RATE c=32 pid=$p warmup=2s"
		-before "flooded$sfx=setsid nice -n 19 taskset -c $LOAD_CPU $work/linkgate bench -R$flood -c$FLOOD_CONNS -d${flood_secs}s -s scripts/bench/create.lua $u/shortenURL >>$work/flood$sfx.log 2>&1 & sleep 1"
		-before "qrflood$sfx=setsid nice -n 19 taskset -c $LOAD_CPU $work/linkgate bench -c$QR_CONNS -d${flood_secs}s '$u/api/v1/links/$i/qr?size=2048' >>$work/qrflood$sfx.log 2>&1 & sleep 1")
}
targets=(-target "quiet $url/$id gen=linkgate R=$REDIRECT_RATE c=32 pid=$lg_pid warmup=2s")
flood_targets "" "$url" "$id" "$lg_pid"
[ -z "$BEFORE_REF$BEFORE_ARGS" ] || flood_targets _before "$before_url" "$before_id" "$before_pid"
measure "$res" -linkgate "$work/linkgate" "${targets[@]}"
metrics=$(curl -sf "$url/metrics")

step "results"
table "$res" <<'TABLE'
{{report "POST /shortenURL: create capacity" "capacity"}}
{{report "GET /{id}, quiet" "quiet"}}
{{report "GET /{id}, during the create flood" "flooded"}}
{{report "GET /{id}, during the QR flood" "qrflood"}}
redirect latency at {{printf "%.0f" (med "quiet" "rps")}}/s, corrected (ms), median (range) of rounds:
  p50   quiet {{mr "%.2f" (vals "quiet" "p50")}}, create flood {{mr "%.2f" (vals "flooded" "p50")}}, QR flood {{mr "%.2f" (vals "qrflood" "p50")}}
  p99   quiet {{mr "%.2f" (vals "quiet" "p99")}}, create flood {{mr "%.2f" (vals "flooded" "p99")}}, QR flood {{mr "%.2f" (vals "qrflood" "p99")}}
        ratio to quiet: create flood {{printf "%.2f" (div (med "flooded" "p99") (med "quiet" "p99"))}}, QR flood {{printf "%.2f" (div (med "qrflood" "p99") (med "quiet" "p99"))}} (target ≤ 2); per round {{each "%.2f" (per "flooded" "quiet" "p99")}} / {{each "%.2f" (per "qrflood" "quiet" "p99")}}
  p99.9 quiet {{mr "%.2f" (vals "quiet" "p99.9")}}, create flood {{mr "%.2f" (vals "flooded" "p99.9")}}, QR flood {{mr "%.2f" (vals "qrflood" "p99.9")}}
  the redirect generator's own send lag, p99 (ms; it shares its CPU with the flood's generator, at nice 19): quiet {{mr "%.2f" (vals "quiet" "lag99")}}, create flood {{mr "%.2f" (vals "flooded" "lag99")}}, QR flood {{mr "%.2f" (vals "qrflood" "lag99")}}
redirects that failed (socket errors or status ≥ 400), all rounds:
  quiet {{printf "%.3f" (mul 100 (failed "quiet"))}} %, create flood {{printf "%.3f" (mul 100 (failed "flooded"))}} %, QR flood {{printf "%.3f" (mul 100 (failed "qrflood"))}} % (target ≤ 0.1 %)
TABLE
if [ -n "$BEFORE_REF$BEFORE_ARGS" ]; then
	echo
	echo "before: the same floods against $before_what, rounds interleaved with the above:"
	table "$res" <<'TABLE'
{{report "GET /{id}, during the create flood, before" "flooded_before"}}
{{report "GET /{id}, during the QR flood, before" "qrflood_before"}}
  p50   create flood {{mr "%.2f" (vals "flooded_before" "p50")}}, QR flood {{mr "%.2f" (vals "qrflood_before" "p50")}}
  p99   create flood {{mr "%.2f" (vals "flooded_before" "p99")}}, QR flood {{mr "%.2f" (vals "qrflood_before" "p99")}}
        ratio to quiet: create flood {{printf "%.2f" (div (med "flooded_before" "p99") (med "quiet" "p99"))}}, QR flood {{printf "%.2f" (div (med "qrflood_before" "p99") (med "quiet" "p99"))}}; per round {{each "%.2f" (per "flooded_before" "quiet" "p99")}} / {{each "%.2f" (per "qrflood_before" "quiet" "p99")}}
        after / before p99: create flood {{printf "%.3f" (div (med "flooded" "p99") (med "flooded_before" "p99"))}}, QR flood {{printf "%.3f" (div (med "qrflood" "p99") (med "qrflood_before" "p99"))}}; per round {{each "%.3f" (per "flooded" "flooded_before" "p99")}} / {{each "%.3f" (per "qrflood" "qrflood_before" "p99")}}
  p99.9 create flood {{mr "%.2f" (vals "flooded_before" "p99.9")}}, QR flood {{mr "%.2f" (vals "qrflood_before" "p99.9")}}
  the redirect generator's own send lag, p99 (ms): create flood {{mr "%.2f" (vals "flooded_before" "lag99")}}, QR flood {{mr "%.2f" (vals "qrflood_before" "lag99")}}
  failed: create flood {{printf "%.3f" (mul 100 (failed "flooded_before"))}} %, QR flood {{printf "%.3f" (mul 100 (failed "qrflood_before"))}} %
TABLE
fi
echo "the floods as their generator saw them (one line per round):"
for sfx in "" ${before_pid:+_before}; do
	grep -h '^Requests/sec' "$work/flood$sfx.log" | sed "s/^/  creates$sfx: /" || true
	grep -h '^Requests/sec' "$work/qrflood$sfx.log" | sed "s/^/  QR codes$sfx: /" || true
done
counters='^linkgate_http_requests_shed_total|^linkgate_links_created_total|^linkgate_http_requests_total\{code="(302|503)",route="(redirect|shorten_url|links_qr)"\}'
echo "server counters after the rounds:"
grep -E "$counters" <<<"$metrics" | sed 's/^/  /'
if [ -n "${before_pid:-}" ]; then
	echo "before server counters:"
	curl -sf "$before_url/metrics" | grep -E "$counters" | sed 's/^/  /'
fi
for log in "$work"/after.log "$work"/before.log; do
	if [ -f "$log" ] && grep -qi error "$log"; then
		echo "$(basename "$log" .log) logged errors:" >&2
		tail -20 "$log" >&2
	fi
done
