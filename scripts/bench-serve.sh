#!/usr/bin/env bash
# make bench-serve: linkgate serve's redirect and create throughput on one
# core, against nginx `return 302` (1 worker) on the same core as the
# ceiling. Results and their reading: docs/serve-benchmarks.md.
#
#  - a pebble store preloaded with N (1,000,000) links, cached in
#    .cache/bench and copied fresh for every run;
#  - the server pinned to SERVER_CPU with GOMAXPROCS=1, Debian wrk pinned
#    to LOAD_CPU: -t1 -c50 -d10s, ROUNDS (3) rounds, medians;
#  - (a) GET /{id} over random preloaded ids (scripts/bench/redirect.lua),
#    (b) nginx driven by the same script, rounds interleaved with (a);
#    (a1)/(b1) the same with one id and a static request (no Lua), since
#    wrk's Lua can cap (a) and (b) alike;
#    (c) POST /shortenURL with a unique URL per request (create.lua) into
#    the 1M-link store, and (c0) the same into a fresh, empty store;
#  - (n)/(v): issue 27's anchor — nginx resolving the same ids through a
#    `map` with a buffered access_log (start_nginx_map) against linkgate
#    with visits counted, both driven by scripts/bench/visits.lua (a
#    browser's User-Agent and Referer, classified and counted); (nh)/(vh)
#    the same over the HOT (10,000) first ids; ratios by CPU per request;
#  - (l)/(l1): issue 26's access log — a second linkgate, the same but
#    for --access-log FILE (combined), on its own copy of the store, same
#    pinning, driven as (v) and (a1), rounds interleaved with them; ratio
#    of CPU per request on/off (target ≤ 1.05);
#  - the server's resident memory after the redirect rounds;
#  - BASE=rev (optional; a revision with the pebble store) also serves
#    that revision's linkgate on its own copy of the store, same pinning,
#    its redirect rounds (o)/(o1) interleaved with the others, and prints
#    this tree against it: before/after in one run.
#
# BENCH_SERVE_ROWS selects groups of rows (default "plain", everything
# above; "all" is every group), so that one group runs in a few minutes:
#   tls   redirects (one id, a static request) over TLS, against nginx
#         `return 302` on the same core, same certificate (ECDSA P-256 from
#         `benchcmp cert`), same cipher suite and curve choices (nginx_tls
#         in lib.sh): linkgate serve --tls CERT,KEY on its own copy of the
#         store. (s)/(ns) HTTPS keep-alive, wrk; (h)/(nh2) HTTP/2 by ALPN,
#         h2load -c$H2_CONNS (4) -m10; (k)/(nk) a full handshake per
#         request (wrk -H 'Connection: close': a new connection each, and
#         wrk resumes no session) — its CPU per request is the CPU of a
#         handshake plus one request. Ratios by CPU per request. Alone
#         (no plain), N defaults to 1000 links.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench-lib.sh"
cd "$LINKGATE_ROOT"
export GOTOOLCHAIN=local
ROWS=" ${BENCH_SERVE_ROWS:-plain} "
[ "$ROWS" = " all " ] && ROWS=" plain tls "
for r in $ROWS; do
	case $r in plain | tls) ;; *) die "BENCH_SERVE_ROWS: unknown group $r (plain tls, or all)" ;; esac
done
rows() { [[ $ROWS == *" $1 "* ]]; }
N_DEFAULT=1000000
rows plain || N_DEFAULT=1000
N=${N:-$N_DEFAULT}
H2_CONNS=${H2_CONNS:-4}
IDS_LIMIT=${IDS_LIMIT:-0}
HOT=${HOT:-10000}
BASE=${BASE:-}

bench_workdir # $work, $pids: killed and removed on exit

preloaded_links "$work" "$N"
cp -r "$links_dir" "$work/links"
cp -r "$links_dir" "$work/links-al"
if [ -n "$BASE" ]; then
	base_build "$work" "$BASE"
	base_links "$work"
	cp -r "$base_links_dir" "$work/links-base"
fi
export IDS_LIMIT

exec 9>"$BENCH_LOCK"
step "waiting for $BENCH_LOCK"
flock 9
echo "server on CPU $SERVER_CPU (GOMAXPROCS=1); wrk -t1 -c$CONNS -d$DURATION on CPU $LOAD_CPU; $ROUNDS rounds; $N preloaded links"

if rows tls; then
	step "TLS: nginx ssl / http2 and linkgate serve --tls, rounds interleaved"
	command -v h2load >/dev/null || die "h2load not installed (apt-get install nghttp2-client)"
	"$benchcmp" cert "$work/tls"
	cp -r "$links_dir" "$work/links-tls"
	ngt_port=$(free_port) ngh2_port=$(free_port) lgt_port=$(free_port)
	ngt_pid=$(start_nginx_302 "$work/nginx-tls" "$(free_port)" "$work/tls" "$ngt_port" "$ngh2_port")
	pids+=("$ngt_pid")
	GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --tls "$work/tls/server.pem,$work/tls/server-key.pem" \
		--https-addr "127.0.0.1:$lgt_port" --http-addr "127.0.0.1:$(free_port)" \
		--store "pebble:$work/links-tls" --log-level warn >"$work/linkgate-tls.log" 2>&1 &
	lgt_pid=$!
	pids+=("$lgt_pid")
	wait_tcp 127.0.0.1 "$ngh2_port" 10 || die "nginx (TLS) did not start: $(cat "$work/nginx-tls/logs/error.log")"
	wait_tcp 127.0.0.1 "$lgt_port" 30 || die "linkgate --tls did not start: $(cat "$work/linkgate-tls.log")"
	one_id=$(head -1 "$IDS_FILE")
	for u in "https://localhost:$ngt_port/$one_id" "https://localhost:$lgt_port/$one_id"; do
		[ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$work/tls/ca.pem" "$u")" = 302 ] || die "$u: no 302 over TLS"
	done
	for p in "$ngh2_port" "$lgt_port"; do # Debian's curl has no HTTP/2
		h2load -n1 -c1 "https://localhost:$p/$one_id" | grep -q '1 succeeded' || die "no 302 over HTTP/2 on :$p"
	done
	tls_res=$work/tls.jsonl
	close="arg=-H arg=Connection:%20close"
	h2="gen=h2load c=$H2_CONNS m=10"
	"$benchcmp" run -o "$tls_res" -cpu "$LOAD_CPU" -rounds "$ROUNDS" -d "$DURATION" -c "$CONNS" \
		-h2load "$(command -v h2load)" \
		-target "ns https://localhost:$ngt_port/$one_id pid=$ngt_pid prewarm=2s" \
		-target "s https://localhost:$lgt_port/$one_id pid=$lgt_pid prewarm=3s" \
		-target "nh2 https://localhost:$ngh2_port/$one_id pid=$ngt_pid $h2 prewarm=2s" \
		-target "h https://localhost:$lgt_port/$one_id pid=$lgt_pid $h2 prewarm=2s" \
		-target "nk https://localhost:$ngt_port/$one_id pid=$ngt_pid $close prewarm=2s" \
		-target "k https://localhost:$lgt_port/$one_id pid=$lgt_pid $close prewarm=2s"
	kill "$lgt_pid" "$ngt_pid"
	step "results (TLS)"
	table "$tls_res" <<'TABLE'
redirects over TLS, one id, linkgate serve --tls vs nginx return 302 (1 worker), same core, same certificate and suites:
CPU per request (µs, median (rounds)); per core = nginx/linkgate, median (range) of per-round ratios:
  HTTPS keep-alive (wrk):     nginx {{printf "%.2f" (med "ns" "cpu")}} ({{each "%.2f" (vals "ns" "cpu")}}), linkgate {{printf "%.2f" (med "s" "cpu")}} ({{each "%.2f" (vals "s" "cpu")}}) → {{mr "%.3f" (per "ns" "s" "cpu")}}  target ≥ 0.9
  HTTP/2, 10 streams (h2load): nginx {{printf "%.2f" (med "nh2" "cpu")}} ({{each "%.2f" (vals "nh2" "cpu")}}), linkgate {{printf "%.2f" (med "h" "cpu")}} ({{each "%.2f" (vals "h" "cpu")}}) → {{mr "%.3f" (per "nh2" "h" "cpu")}}  target ≥ 1.0
  full handshake + 1 request: nginx {{printf "%.2f" (med "nk" "cpu")}} ({{each "%.2f" (vals "nk" "cpu")}}), linkgate {{printf "%.2f" (med "k" "cpu")}} ({{each "%.2f" (vals "k" "cpu")}}) → {{mr "%.3f" (per "nk" "k" "cpu")}}  target ≥ 1.0 (CPU ≤ nginx's)
req/s, median (range): keep-alive nginx {{mr "%.0f" (vals "ns" "rps")}}, linkgate {{mr "%.0f" (vals "s" "rps")}}; HTTP/2 nginx {{mr "%.0f" (vals "nh2" "rps")}}, linkgate {{mr "%.0f" (vals "h" "rps")}}; handshakes nginx {{mr "%.0f" (vals "nk" "rps")}}, linkgate {{mr "%.0f" (vals "k" "rps")}}
p99 ms, median: keep-alive nginx {{printf "%.2f" (med "ns" "p99")}}, linkgate {{printf "%.2f" (med "s" "p99")}}; HTTP/2 nginx {{printf "%.2f" (med "nh2" "p99")}}, linkgate {{printf "%.2f" (med "h" "p99")}}; handshakes nginx {{printf "%.2f" (med "nk" "p99")}}, linkgate {{printf "%.2f" (med "k" "p99")}}
TABLE
	if grep -qi error "$work/linkgate-tls.log"; then
		echo "linkgate --tls logged errors:" >&2
		cat "$work/linkgate-tls.log" >&2
	fi
	rows plain || exit 0
fi

nginx_port=$(free_port)
pids+=("$(start_nginx_302 "$work/nginx" "$nginx_port")")
map_port=$(free_port)
map_pid=$(start_nginx_map "$work/nginx-map" "$map_port" "$IDS_FILE")
pids+=("$map_pid")
lg_port=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$lg_port" \
	--store "pebble:$work/links" --log-level warn >"$work/linkgate.log" 2>&1 &
lg_pid=$!
pids+=("$lg_pid")
wait_tcp 127.0.0.1 "$nginx_port" 10 || die "nginx did not start"
wait_tcp 127.0.0.1 "$map_port" 120 || die "nginx (map) did not start: $(cat "$work/nginx-map/logs/error.log")"
wait_tcp 127.0.0.1 "$lg_port" 30 || die "linkgate did not start: $(cat "$work/linkgate.log")"
al_port=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$al_port" \
	--store "pebble:$work/links-al" --log-level warn --access-log "$work/access.log" >"$work/linkgate-al.log" 2>&1 &
al_pid=$!
pids+=("$al_pid")
wait_tcp 127.0.0.1 "$al_port" 30 || die "linkgate (access log) did not start: $(cat "$work/linkgate-al.log")"
base_targets=()
if [ -n "$BASE" ]; then
	base_port=$(free_port)
	GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate-base" serve --addr "127.0.0.1:$base_port" \
		--store "pebble:$work/links-base" --log-level warn >"$work/linkgate-base.log" 2>&1 &
	base_pid=$!
	pids+=("$base_pid")
	wait_tcp 127.0.0.1 "$base_port" 30 || die "the base did not start: $(cat "$work/linkgate-base.log")"
fi

nginx_url=http://127.0.0.1:$nginx_port/
lg_url=http://127.0.0.1:$lg_port/
lua=scripts/bench/redirect.lua
res=$work/results.jsonl
step "redirects: nginx and linkgate, rounds interleaved"
# (a)/(b): random ids through the Lua script — realistic, but wrk's Lua
# costs CPU on the load core, so both can be capped by wrk itself.
# (a1)/(b1): one id, a static request (no Lua): the server-bound ratio.
# The first round is preceded by a warm-up (page cache, connections).
one_id=$(head -1 "$IDS_FILE")
nginx_pid=${pids[0]}
if [ -n "$BASE" ]; then
	base_targets=(-target "o http://127.0.0.1:$base_port/ lua=$lua pid=$base_pid prewarm=3s"
		-target "o1 http://127.0.0.1:$base_port/$one_id pid=$base_pid")
fi
measure "$res" \
	-target "b $nginx_url lua=$lua pid=$nginx_pid prewarm=2s" \
	-target "a $lg_url lua=$lua pid=$lg_pid prewarm=3s" \
	-target "b1 $nginx_url$one_id pid=$nginx_pid" \
	-target "a1 $lg_url$one_id pid=$lg_pid" \
	-target "n http://127.0.0.1:$map_port/ lua=scripts/bench/visits.lua pid=$map_pid prewarm=2s" \
	-target "v $lg_url lua=scripts/bench/visits.lua pid=$lg_pid prewarm=3s" \
	-target "l http://127.0.0.1:$al_port/ lua=scripts/bench/visits.lua pid=$al_pid prewarm=3s" \
	-target "l1 http://127.0.0.1:$al_port/$one_id pid=$al_pid" \
	"${base_targets[@]}"
step "the same anchor over the $HOT hot ids"
IDS_LIMIT=$HOT measure "$res" \
	-target "nh http://127.0.0.1:$map_port/ lua=scripts/bench/visits.lua pid=$map_pid prewarm=2s" \
	-target "vh $lg_url lua=scripts/bench/visits.lua pid=$lg_pid prewarm=3s"

access_lines=$(wc -l <"$work/access.log")
kill "$al_pid"
rss() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$lg_pid/status"; }
rss_anon=$(rss RssAnon) rss_file=$(rss RssFile) vm_rss=$(rss VmRSS)
if [ -n "$BASE" ]; then
	base_anon=$(awk '$1 == "RssAnon:" {print $2}' "/proc/$base_pid/status")
	kill "$base_pid"
fi

step "creates into the 1M-link store: POST /shortenURL, unique URLs"
# prewarm: the redirect rounds just before made the adaptive create budget
# (--overload-delay) shrink; it regrows by one per 10 ms (256 in 2.6 s),
# which the first measured round must not include.
measure "$res" -target "c ${lg_url}shortenURL lua=scripts/bench/create.lua pid=$lg_pid prewarm=3s"
kill "$lg_pid"; wait "$lg_pid" 2>/dev/null || true

step "creates into a fresh store (same pinning)"
lg_port=$(free_port)
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$work/linkgate" serve --addr "127.0.0.1:$lg_port" \
	--store "pebble:$work/fresh" --log-level warn >>"$work/linkgate.log" 2>&1 &
lg_pid=$!
pids+=("$lg_pid")
wait_tcp 127.0.0.1 "$lg_port" 30 || die "linkgate did not start: $(cat "$work/linkgate.log")"
measure "$res" -target "c0 http://127.0.0.1:$lg_port/shortenURL lua=scripts/bench/create.lua pid=$lg_pid"

step "results"
table "$res" <<'TABLE'
{{report "nginx return 302, random ids (b)" "b"}}
{{report "linkgate GET /{id}, random ids (a)" "a"}}
  ratio (a)/(b), medians: {{printf "%.3f" (div (med "a" "rps") (med "b" "rps"))}}
{{report "nginx return 302, one id (b1)" "b1"}}
{{report "linkgate GET /{id}, one id (a1)" "a1"}}
  ratio (a1)/(b1), medians: {{printf "%.3f" (div (med "a1" "rps") (med "b1" "rps"))}}
server CPU per request (µs, median of rounds; capacity ratio = nginx/linkgate):
  random ids: nginx {{printf "%.2f" (med "b" "cpu")}}, linkgate {{printf "%.2f" (med "a" "cpu")}} → {{printf "%.3f" (div (med "b" "cpu") (med "a" "cpu"))}}
  one id:     nginx {{printf "%.2f" (med "b1" "cpu")}}, linkgate {{printf "%.2f" (med "a1" "cpu")}} → {{printf "%.3f" (div (med "b1" "cpu") (med "a1" "cpu"))}}
visits counted vs nginx map + buffered access_log (issue 27; CPU per request, µs, median (rounds); ratio = nginx/linkgate, target ≥ 0.85 over all ids, ≥ 0.95 hot):
  all ids: nginx {{printf "%.2f" (med "n" "cpu")}} ({{each "%.2f" (vals "n" "cpu")}}), linkgate {{printf "%.2f" (med "v" "cpu")}} ({{each "%.2f" (vals "v" "cpu")}}) → {{printf "%.3f" (div (med "n" "cpu") (med "v" "cpu"))}}
  hot ids (HOT): nginx {{printf "%.2f" (med "nh" "cpu")}} ({{each "%.2f" (vals "nh" "cpu")}}), linkgate {{printf "%.2f" (med "vh" "cpu")}} ({{each "%.2f" (vals "vh" "cpu")}}) → {{printf "%.3f" (div (med "nh" "cpu") (med "vh" "cpu"))}}
access log on (--access-log FILE, combined) vs off (CPU per request, µs, median (rounds); ratio = on/off, target ≤ 1.05):
  random ids, browser headers: off (v) {{printf "%.2f" (med "v" "cpu")}} ({{each "%.2f" (vals "v" "cpu")}}), on (l) {{printf "%.2f" (med "l" "cpu")}} ({{each "%.2f" (vals "l" "cpu")}}) → {{printf "%.3f" (div (med "l" "cpu") (med "v" "cpu"))}}
  one id:                      off (a1) {{printf "%.2f" (med "a1" "cpu")}} ({{each "%.2f" (vals "a1" "cpu")}}), on (l1) {{printf "%.2f" (med "l1" "cpu")}} ({{each "%.2f" (vals "l1" "cpu")}}) → {{printf "%.3f" (div (med "l1" "cpu") (med "a1" "cpu"))}}
{{report "POST /shortenURL, 1M-link store (c)" "c"}}
{{report "POST /shortenURL, fresh store (c0)" "c0"}}
server CPU per create (µs, median; range): 1M store {{printf "%.2f" (med "c" "cpu")}} ({{sorted "%.2f" (vals "c" "cpu")}}), fresh store {{printf "%.2f" (med "c0" "cpu")}} ({{sorted "%.2f" (vals "c0" "cpu")}}); p99 (ms, median): {{printf "%.1f" (med "c" "p99")}}, {{printf "%.1f" (med "c0" "p99")}}
TABLE
echo "access log lines written: $access_lines"
echo "linkgate memory after the redirect rounds ($N links): RssAnon $((rss_anon / 1024)) MiB, RssFile $((rss_file / 1024)) MiB, VmRSS $((vm_rss / 1024)) MiB"
if [ -n "$BASE" ]; then
	echo "this tree against the base ($BASE), same run:"
	table "$res" <<'TABLE'
{{report "base GET /{id}, random ids (o)" "o"}}
{{report "base GET /{id}, one id (o1)" "o1"}}
server CPU per request (µs, medians; ratio = base/this tree, above 1: this tree is cheaper):
  random ids: base {{printf "%.2f" (med "o" "cpu")}}, this tree {{printf "%.2f" (med "a" "cpu")}} → {{printf "%.3f" (div (med "o" "cpu") (med "a" "cpu"))}}
  one id:     base {{printf "%.2f" (med "o1" "cpu")}}, this tree {{printf "%.2f" (med "a1" "cpu")}} → {{printf "%.3f" (div (med "o1" "cpu") (med "a1" "cpu"))}}
  base vs nginx by CPU: random ids {{printf "%.3f" (div (med "b" "cpu") (med "o" "cpu"))}}, one id {{printf "%.3f" (div (med "b1" "cpu") (med "o1" "cpu"))}}
TABLE
	echo "base memory after the redirect rounds: RssAnon $((base_anon / 1024)) MiB"
fi
if grep -qi error "$work/linkgate.log"; then
	echo "linkgate logged errors:" >&2
	cat "$work/linkgate.log" >&2
fi
