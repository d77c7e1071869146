#!/usr/bin/env bash
# make bench-gateway: the seed's two APISIX scenarios against linkgate gateway,
# with nginx proxy_pass as the anchor, per APISIX's benchmark/run.sh method.
#
#   upstream  nginx + echo module on 127.0.0.1:1980 answering "1234567890"
#             (1 worker, pinned to the load generator's core)
#   gateway   linkgate gateway, GOMAXPROCS=1, pinned to core $GW_CPU
#   baseline  nginx proxy_pass, 1 worker, upstream keepalive, same core
#   proto     tools/gatewayproto: a bare fasthttp server + HostClient adding the
#             same forwarded headers (no routing, plugins, retries, timeouts),
#             GOMAXPROCS=1, same core: what the engine alone costs
#   old       with OLD_REF=<git ref>: linkgate gateway built from that ref, same
#             scenarios (o1, o2; and the fixed rates), for before/after
#             figures from one run
#   load      wrk -t2 -c16 -d${DURATION}, pinned to core $LOAD_CPU
#
# BENCH_GATEWAY_ROWS selects groups of rows (default "plain"; "all" is every
# group), so that one run of a few groups fits in a few minutes:
#   plain      the rows above: scenarios 1-3 (and OLD_REF) vs nginx proxy_pass
#   tls        HTTP/1.1 over TLS, keep-alive, ECDSA P-256 (benchcmp cert):
#              scenarios 1 and 2 on --listen-tls vs nginx ssl + proxy_pass
#   handshake  a full TLS handshake per request (wrk -H 'Connection: close';
#              wrk resumes no session): scenario 1 vs nginx ssl
#   h2         HTTP/2 over TLS (h2 by ALPN), h2load -c$H2_CONNS -m10:
#              scenario 1 vs nginx http2
#   haproxy    scenarios 1 and 2, cleartext and TLS, vs HAProxy (nbthread 1,
#              http-reuse always)
#   caddy      the same vs Caddy (reverse_proxy, GOMAXPROCS=1)
#   fixed      latency at a fixed rate: nginx's capacity measured as in
#              plain (wrk, its median), then `linkgate bench` (open loop,
#              latency corrected for coordinated omission) at FIXED_SHARES
#              of it (50 % and 80 %) against nginx proxy_pass and scenario
#              1, the same upstream: p99 of each and their ratio, per round
#              (target: linkgate ≤ 1.5× nginx). BENCH_GATEWAY_ROWS=fixed
#              runs only this in about three minutes.
# Every anchor runs on core $GW_CPU like nginx, and sends the upstream the
# same forwarded headers; TLS clients connect to localhost (the SNI of the
# gateway's ssl resource) with TLS 1.2 and 1.3 on every server.
#
# Scenario 1: the seed's route with no plugins. Scenario 2: limit-count
# (count 2000000000000, time_window 60, rejected_code 503, key remote_addr)
# + prometheus. Scenario 3: an API as APISIX users run one — key-auth (a
# consumer's key in the apikey header), limit-req (rate and burst
# 2000000000000, key remote_addr), cors, request-id, prometheus.
# Targets are measured round-robin (nginx, proto, s1, s2, s3) ROUNDS times
# so machine noise hits all alike; the table gives medians and ranges, and
# the ratio to nginx is the median of per-round ratios.
#
# Environment: ROUNDS (2), DURATION (5s), CONNS (16), H2_CONNS (4), GW_CPU (0),
# LOAD_CPU (1), UPSTREAM_PORT (1980), OLD_REF (unset), BENCH_GATEWAY_ROWS
# (plain), FIXED_SHARES ("0.5 0.8"), FIXED_DURATION (10s), KEEP (1 keeps the
# temp dir).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LINKGATE_ROOT"
results_begin bench-gateway # before the defaults: the command the run's JSON records

ROUNDS=${ROUNDS:-2} DURATION=${DURATION:-5s} CONNS=${CONNS:-16}
GW_CPU=${GW_CPU:-0} LOAD_CPU=${LOAD_CPU:-1} UPSTREAM_PORT=${UPSTREAM_PORT:-1980} H2_CONNS=${H2_CONNS:-4}
ROWS=" ${BENCH_GATEWAY_ROWS:-plain} "
FIXED_SHARES=${FIXED_SHARES:-0.5 0.8} FIXED_DURATION=${FIXED_DURATION:-10s}
[ "$ROWS" = " all " ] && ROWS=" plain tls handshake h2 haproxy caddy fixed "
for r in $ROWS; do
	case $r in plain | tls | handshake | h2 | haproxy | caddy | fixed) ;; *) die "BENCH_GATEWAY_ROWS: unknown group $r (plain tls handshake h2 haproxy caddy fixed, or all)" ;; esac
done
rows() { for r in "$@"; do [[ $ROWS == *" $r "* ]] && return 0; done; return 1; }
KEY=edd1c9f034335f136f87ad84b625c8f1
ECHO_MODULE=/usr/lib/nginx/modules/ngx_http_echo_module.so

for c in nginx wrk taskset flock curl; do command -v "$c" >/dev/null || die "$c not installed (apt-get install nginx-light libnginx-mod-http-echo wrk util-linux curl)"; done
[ -f "$ECHO_MODULE" ] || die "$ECHO_MODULE missing (apt-get install libnginx-mod-http-echo)"
rows h2 && { command -v h2load >/dev/null || die "h2load not installed (apt-get install nghttp2-client)"; }
rows haproxy && { command -v haproxy >/dev/null || die "haproxy not installed (apt-get install haproxy)"; }
rows caddy && { command -v caddy >/dev/null || die "caddy not installed (apt-get install caddy)"; }

tmp=$(mktemp -d /tmp/linkgate-bench-gateway.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -f "$results_run"
	[ "${KEEP:-0}" = 1 ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

step "build linkgate and tools/gatewayproto"
go build -trimpath -o "$tmp/linkgate" ./cmd/linkgate
go build -trimpath -o "$tmp/gatewayproto" ./tools/gatewayproto
go build -o "$tmp/benchcmp" ./tools/benchcmp
if [ -n "${OLD_REF:-}" ]; then
	step "build linkgate at $OLD_REF"
	git worktree add -q --detach "$tmp/old-src" "$OLD_REF"
	(cd "$tmp/old-src" && go build -trimpath -o "$tmp/linkgate-old" ./cmd/linkgate)
	git worktree remove --force "$tmp/old-src"
fi

gw_port=$(free_port)
ng_port=$(free_port)
ngfx_port=$(free_port)
prom_port=$(free_port)
proto_port=$(free_port)
old_port=$(free_port)
old_prom_port=$(free_port)
gwtls_port=$(free_port)
ngtls_port=$(free_port)
ngh2_port=$(free_port)
hp_port=$(free_port)
hptls_port=$(free_port)
cd_port=$(free_port)
cdtls_port=$(free_port)
"$tmp/benchcmp" cert "$tmp/tls"
cat "$tmp/tls/server.pem" "$tmp/tls/server-key.pem" >"$tmp/tls/haproxy.pem"

temps="client_body_temp_path $tmp; proxy_temp_path $tmp; fastcgi_temp_path $tmp; uwsgi_temp_path $tmp; scgi_temp_path $tmp;"
cat >"$tmp/upstream.conf" <<CONF
load_module $ECHO_MODULE;
worker_processes 1;
daemon off;
pid $tmp/upstream.pid;
error_log $tmp/upstream.err warn;
events { worker_connections 10240; }
http {
	access_log off; $temps
	server {
		listen 127.0.0.1:$UPSTREAM_PORT;
		location / { echo_duplicate 1 "1234567890"; }
	}
}
CONF
# The baseline sends upstream what the gateway sends: Host, X-Real-IP,
# X-Forwarded-For/Proto/Host/Port.
proxy_location="location / {
			proxy_pass http://backend;
			proxy_http_version 1.1;
			proxy_set_header Connection \"\";
			proxy_set_header Host \$http_host;
			proxy_set_header X-Real-IP \$remote_addr;
			proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Proto \$scheme;
			proxy_set_header X-Forwarded-Host \$host;
			proxy_set_header X-Forwarded-Port \$server_port;
		}"
cat >"$tmp/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $tmp/nginx.pid;
error_log $tmp/nginx.err warn;
events { worker_connections 10240; }
http {
	access_log off; $temps
	upstream backend {
		server 127.0.0.1:$UPSTREAM_PORT;
		keepalive 320;
		keepalive_requests 1000;
		keepalive_timeout 60s;
	}
	server {
		listen 127.0.0.1:$ng_port;
		$proxy_location
	}
	server {
		# The fixed-rate rows: nginx would end each client connection after
		# 1000 requests, and an open-loop generator's queue waits for the
		# reconnection (p99 in seconds); the gateway does not close them.
		keepalive_requests 100000000;
		listen 127.0.0.1:$ngfx_port;
		$proxy_location
	}
	# The gateway's certificate, protocols and suite choices (lib.sh).
$(nginx_tls "$tmp/tls")
	server {
		# nginx ends a client connection after 1000 requests by default
		# (HTTP/2 too, where h2load does not reconnect); the gateway does not.
		keepalive_requests 100000000;
		listen 127.0.0.1:$ngtls_port ssl;
		listen 127.0.0.1:$ngh2_port ssl http2;
		$proxy_location
	}
}
CONF
cat >"$tmp/haproxy.cfg" <<CONF
global
	nbthread 1
	maxconn 4096
	ssl-default-bind-options ssl-min-ver TLSv1.2
defaults
	mode http
	timeout connect 5s
	timeout client 60s
	timeout server 60s
	http-reuse always
frontend fe
	bind 127.0.0.1:$hp_port
	bind 127.0.0.1:$hptls_port ssl crt $tmp/tls/haproxy.pem alpn http/1.1
	default_backend be
backend be
	option forwardfor
	http-request set-header X-Real-IP %[src]
	http-request set-header X-Forwarded-Proto http unless { ssl_fc }
	http-request set-header X-Forwarded-Proto https if { ssl_fc }
	http-request set-header X-Forwarded-Host %[req.hdr(host)]
	http-request set-header X-Forwarded-Port %[dst_port]
	server up 127.0.0.1:$UPSTREAM_PORT
CONF
# Caddy adds X-Forwarded-For/Proto/Host itself; upstream keep-alive is its default.
caddy_proxy="reverse_proxy 127.0.0.1:$UPSTREAM_PORT {
		header_up X-Real-IP {remote_host}
		header_up X-Forwarded-Port {http.request.port}
	}"
cat >"$tmp/Caddyfile" <<CONF
{
	admin off
	auto_https off
	storage file_system $tmp/caddy
}
http://127.0.0.1:$cd_port {
	$caddy_proxy
}
https://localhost:$cdtls_port {
	bind 127.0.0.1
	tls $tmp/tls/server.pem $tmp/tls/server-key.pem
	$caddy_proxy
}
CONF

step "start upstream (127.0.0.1:$UPSTREAM_PORT), nginx baseline (:$ng_port), linkgate gateway (:$gw_port)"
if (exec 3<>"/dev/tcp/127.0.0.1/$UPSTREAM_PORT") 2>/dev/null; then
	die "127.0.0.1:$UPSTREAM_PORT is already in use (set UPSTREAM_PORT)"
fi
taskset -c "$LOAD_CPU" nginx -p "$tmp" -c "$tmp/upstream.conf" & pids+=($!)
taskset -c "$GW_CPU" nginx -p "$tmp" -c "$tmp/nginx.conf" & pids+=($!)
GOMAXPROCS=1 taskset -c "$GW_CPU" "$tmp/linkgate" gateway --listen "127.0.0.1:$gw_port" \
	--listen-tls "127.0.0.1:$gwtls_port" --prometheus-listen "127.0.0.1:$prom_port" --admin-key "$KEY" \
	--config-store "bolt:$tmp/gateway.db" --log-level warn 2>"$tmp/gateway.log" & pids+=($!)
gw_pid=$!
GOMAXPROCS=1 taskset -c "$GW_CPU" "$tmp/gatewayproto" -addr "127.0.0.1:$proto_port" \
	-upstream "127.0.0.1:$UPSTREAM_PORT" >/dev/null 2>"$tmp/proto.log" & pids+=($!)
proto_pid=$!
if [ -n "${OLD_REF:-}" ]; then
	GOMAXPROCS=1 taskset -c "$GW_CPU" "$tmp/linkgate-old" gateway --listen "127.0.0.1:$old_port" \
		--prometheus-listen "127.0.0.1:$old_prom_port" --admin-key "$KEY" \
		--config-store "bolt:$tmp/gateway-old.db" --log-level warn 2>"$tmp/gateway-old.log" & pids+=($!)
	old_pid=$!
	wait_tcp 127.0.0.1 "$old_port" 10 || { cat "$tmp/gateway-old.log"; die "old gateway did not start"; }
fi
if rows haproxy; then
	taskset -c "$GW_CPU" haproxy -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 & pids+=($!)
	hp_pid=$!
	wait_tcp 127.0.0.1 "$hp_port" 10 || { cat "$tmp/haproxy.log"; die "haproxy did not start"; }
fi
if rows caddy; then
	HOME=$tmp XDG_DATA_HOME=$tmp/caddy XDG_CONFIG_HOME=$tmp/caddy GOMAXPROCS=1 taskset -c "$GW_CPU" \
		caddy run --config "$tmp/Caddyfile" --adapter caddyfile >"$tmp/caddy.log" 2>&1 & pids+=($!)
	cd_pid=$!
	wait_tcp 127.0.0.1 "$cdtls_port" 10 || { cat "$tmp/caddy.log"; die "caddy did not start"; }
fi
wait_tcp 127.0.0.1 "$UPSTREAM_PORT" 10 || { cat "$tmp/upstream.err"; die "upstream did not start"; }
wait_tcp 127.0.0.1 "$ng_port" 10 || { cat "$tmp/nginx.err"; die "nginx did not start"; }
wait_tcp 127.0.0.1 "$gw_port" 10 || { cat "$tmp/gateway.log"; die "gateway did not start"; }

# The seed's route registrations, byte for byte (the same files the admin
# API's golden tests send).
route_plain=$(<gateway/admin/testdata/seed/route_hello.json)
route_plugins=$(<gateway/admin/testdata/seed/route_hello_plugins.json)
if [ "$UPSTREAM_PORT" != 1980 ]; then
	route_plain=${route_plain//1980/$UPSTREAM_PORT}
	route_plugins=${route_plugins//1980/$UPSTREAM_PORT}
fi
route_s3='{"uri":"/hello","plugins":{"key-auth":{},"limit-req":{"rate":2000000000000,"burst":2000000000000,"rejected_code":503,"key":"remote_addr"},"cors":{},"request-id":{},"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:'"$UPSTREAM_PORT"'":1}}}'
consumer_s3='{"username":"bench","plugins":{"key-auth":{"key":"bench-key"}}}'
put_route() { # PORT BODY [HEADER]: the request proxied with HEADER must answer
	curl -sf "http://127.0.0.1:$1/apisix/admin/routes/1" -H "X-API-KEY: $KEY" -X PUT -d "$2" >/dev/null ||
		die "admin PUT failed"
	sleep 0.2
	[ "$(curl -s ${3:+-H "$3"} "http://127.0.0.1:$1/hello")" = 1234567890 ] || die "gateway on :$1 does not proxy /hello"
}
curl -sf "http://127.0.0.1:$gw_port/apisix/admin/consumers" -H "X-API-KEY: $KEY" -X PUT -d "$consumer_s3" >/dev/null ||
	die "admin PUT of the scenario 3 consumer failed"
wait_tcp 127.0.0.1 "$proto_port" 10 || { cat "$tmp/proto.log"; die "gatewayproto did not start"; }
[ "$(curl -s "http://127.0.0.1:$ng_port/hello")" = 1234567890 ] || die "nginx baseline does not proxy /hello"
[ "$(curl -s "http://127.0.0.1:$proto_port/hello")" = 1234567890 ] || die "gatewayproto does not proxy /hello"
# The gateway's certificate: an ssl resource for SNI localhost, the same
# key pair every TLS anchor serves.
nl=$'\n'
cert=$(<"$tmp/tls/server.pem") key=$(<"$tmp/tls/server-key.pem")
curl -sf "http://127.0.0.1:$gw_port/apisix/admin/ssl/1" -H "X-API-KEY: $KEY" -X PUT \
	-d "{\"cert\":\"${cert//$nl/\\n}\",\"key\":\"${key//$nl/\\n}\",\"snis\":[\"localhost\"]}" >/dev/null ||
	die "admin PUT of the ssl resource failed"
https_ok() { [ "$(curl -s --cacert "$tmp/tls/ca.pem" "$@")" = 1234567890 ]; }
https_ok "https://localhost:$ngtls_port/hello" || die "nginx ssl does not proxy /hello"
if rows h2; then # Debian's curl has no HTTP/2: one h2load request must succeed
	h2load -n1 -c1 "https://localhost:$ngh2_port/hello" | grep -q '1 succeeded' || die "nginx http2 does not proxy /hello"
fi
if rows haproxy; then
	https_ok "http://127.0.0.1:$hp_port/hello" && https_ok "https://localhost:$hptls_port/hello" || die "haproxy does not proxy /hello"
fi
if rows caddy; then
	https_ok "http://127.0.0.1:$cd_port/hello" && https_ok "https://localhost:$cdtls_port/hello" || die "caddy does not proxy /hello"
fi
ng_worker=$(pgrep -P "$(cat "$tmp/nginx.pid")" | head -1)
[ -n "$ng_worker" ] || die "nginx baseline worker not found"

# Every target is warmed up for 1 s before each measured run; s1/o1 and
# s2/o2 share a gateway whose route the -before hook switches first.
export KEY route_plain route_plugins route_s3
export -f put_route die
res=$tmp/results.jsonl
targets=()
declare -A added
target() { # NAME URL KEYS [ROUTE]: measured once per round, with ROUTE ("plain" or "plugins") put first
	[ -n "${added[$1]:-}" ] && return
	added[$1]=1
	targets+=(-target "$1 $2 $3 rewarm=1s")
	[ -n "${4:-}" ] && targets+=(-before "$1=put_route $gw_port \"\$route_$4\"")
	return 0
}
gw_tls=https://localhost:$gwtls_port/hello
close="arg=-H arg=Connection:%20close"
if rows plain; then
	target nginx "http://127.0.0.1:$ng_port/hello" "pid=$ng_worker"
	target proto "http://127.0.0.1:$proto_port/hello" "pid=$proto_pid"
	target s1 "http://127.0.0.1:$gw_port/hello" "pid=$gw_pid" plain
	[ -n "${OLD_REF:-}" ] && targets+=(-target "o1 http://127.0.0.1:$old_port/hello pid=$old_pid rewarm=1s" -before "o1=put_route $old_port \"\$route_plain\"")
	target s2 "http://127.0.0.1:$gw_port/hello" "pid=$gw_pid" plugins
	[ -n "${OLD_REF:-}" ] && targets+=(-target "o2 http://127.0.0.1:$old_port/hello pid=$old_pid rewarm=1s" -before "o2=put_route $old_port \"\$route_plugins\"")
	printf 'wrk.headers["apikey"] = "bench-key"\n' >"$tmp/s3.lua"
	targets+=(-target "s3 http://127.0.0.1:$gw_port/hello pid=$gw_pid rewarm=1s lua=$tmp/s3.lua" -before "s3=put_route $gw_port \"\$route_s3\" apikey:bench-key")
fi
if rows fixed; then # nginx's capacity, for the fixed rates
	target nginx "http://127.0.0.1:$ng_port/hello" "pid=$ng_worker"
fi
if rows tls haproxy caddy; then
	target ngtls "https://localhost:$ngtls_port/hello" "pid=$ng_worker"
	target t1 "$gw_tls" "pid=$gw_pid" plain
	target t2 "$gw_tls" "pid=$gw_pid" plugins
fi
if rows handshake; then
	target ngnew "https://localhost:$ngtls_port/hello" "pid=$ng_worker $close"
	target tnew "$gw_tls" "pid=$gw_pid $close" plain
fi
if rows h2; then
	target ngh2 "https://localhost:$ngh2_port/hello" "pid=$ng_worker gen=h2load c=$H2_CONNS m=10"
	target th2 "$gw_tls" "pid=$gw_pid gen=h2load c=$H2_CONNS m=10" plain
fi
if rows haproxy caddy; then
	target s1 "http://127.0.0.1:$gw_port/hello" "pid=$gw_pid" plain
	target s2 "http://127.0.0.1:$gw_port/hello" "pid=$gw_pid" plugins
fi
if rows haproxy; then
	target hp "http://127.0.0.1:$hp_port/hello" "pid=$hp_pid"
	target hptls "https://localhost:$hptls_port/hello" "pid=$hp_pid"
fi
if rows caddy; then
	target cd "http://127.0.0.1:$cd_port/hello" "pid=$cd_pid"
	target cdtls "https://localhost:$cdtls_port/hello" "pid=$cd_pid"
fi

step "measure: $ROUNDS rounds of wrk -t2 -c$CONNS -d$DURATION per target (holding /tmp/linkgate-bench.lock)"
exec 9>/tmp/linkgate-bench.lock
flock 9
"$tmp/benchcmp" run -o "$res" -cpu "$LOAD_CPU" -rounds "$ROUNDS" -t 2 -c "$CONNS" -d "$DURATION" \
	-h2load "$(command -v h2load || echo h2load)" "${targets[@]}"
if rows fixed; then
	# The same upstream and route (scenario 1); each share of nginx's
	# median capacity is offered to nginx and to the gateway alike.
	cap=$("$tmp/benchcmp" report -t '{{printf "%.0f" (med "nginx" "rps")}}' "$res")
	fixed=()
	for share in $FIXED_SHARES; do
		pct=$(awk -v s="$share" 'BEGIN { printf "%.0f", s * 100 }')
		rate=$(awk -v s="$share" -v c="$cap" 'BEGIN { printf "%.0f", s * c }')
		fixed+=(-target "fng$pct http://127.0.0.1:$ngfx_port/hello gen=linkgate R=$rate pid=$ng_worker warmup=2s d=$FIXED_DURATION"
			-target "fgw$pct http://127.0.0.1:$gw_port/hello gen=linkgate R=$rate pid=$gw_pid warmup=2s d=$FIXED_DURATION"
			-before "fgw$pct=put_route $gw_port \"\$route_plain\"")
		if [ -n "${OLD_REF:-}" ]; then
			fixed+=(-target "fgo$pct http://127.0.0.1:$old_port/hello gen=linkgate R=$rate pid=$old_pid warmup=2s d=$FIXED_DURATION"
				-before "fgo$pct=put_route $old_port \"\$route_plain\"")
		fi
	done
	step "fixed rates: $FIXED_SHARES of nginx's $cap req/s, linkgate bench -t2 -c$CONNS -d$FIXED_DURATION, $ROUNDS rounds"
	"$tmp/benchcmp" run -o "$res" -cpu "$LOAD_CPU" -rounds "$ROUNDS" -t 2 -c "$CONNS" -d "$FIXED_DURATION" \
		-linkgate "$tmp/linkgate" "${fixed[@]}"
fi
flock -u 9

step "result (linkgate $(git describe --always --dirty 2>/dev/null || echo dev), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ))"
# One row per target: QPS, latencies, CPU per request and the ratios to
# nginx as medians (ranges) of per-round ratios.
publish_table "$tmp/benchcmp" "$res" <<'TABLE'
{{define "vs"}}{{$n := index . 0}}{{$a := index . 2}}| {{index . 1}} | {{mr "%.0f" (vals $n "rps")}} | {{mr "%.3f" (vals $n "p99")}} | {{if eq $n $a}}anchor{{else}}{{mr "%.2f" (per $n $a "rps")}}{{end}} | {{mr "%.2f" (vals $n "cpu")}} | {{if eq $n $a}}anchor{{else}}{{mr "%.2f" (per $a $n "cpu")}}{{end}} | {{index . 3}} |
{{end -}}
{{define "row"}}{{$n := index . 0}}| {{index . 1}} | {{mr "%.0f" (vals $n "rps")}} | {{mr "%.3f" (vals $n "avg")}} | {{mr "%.3f" (vals $n "p99")}} | {{if eq $n "nginx"}}1.00{{else}}{{mr "%.2f" (per $n "nginx" "rps")}}{{end}} | {{mr "%.2f" (vals $n "cpu")}} | {{printf "%.0f" (median (scale 1e6 (vals $n "cpu")))}} | {{if eq $n "nginx"}}1.00{{else}}{{mr "%.2f" (per "nginx" $n "cpu")}}{{end}} | {{index . 2}} |
{{end -}}
{{if has "proto" -}}
| scenario | QPS median (range) | avg latency ms | p99 latency ms | QPS × nginx | CPU µs/request | QPS per core (10⁶/CPU µs) | per core × nginx | target |
|---|---|---|---|---|---|---|---|---|
{{template "row" (list "nginx" "nginx proxy_pass (anchor)" "") -}}
{{template "row" (list "proto" "bare fasthttp proxy (tools/gatewayproto)" "") -}}
{{template "row" (list "s1" "1: no plugins" "≥ 1.0×") -}}
{{if has "o1"}}{{template "row" (list "o1" "1: no plugins, OLD_REF" "")}}{{end -}}
{{template "row" (list "s2" "2: limit-count + prometheus" "≥ 0.9×") -}}
{{if has "o2"}}{{template "row" (list "o2" "2: limit-count + prometheus, OLD_REF" "")}}{{end -}}
{{template "row" (list "s3" "3: key-auth + limit-req + cors + request-id + prometheus" "")}}
Scenario 3 per core × scenario 1: {{mr "%.2f" (per "s1" "s3" "cpu")}} (CPU per request of 1 over that of 3, per round).

{{len (vals "nginx" "rps")}} rounds; ratios are medians (ranges) of per-round ratios. 'QPS per core' divides a second by the
CPU time the process under test (gateway, or the nginx worker) spent per request: it is what one fully
used core would serve, and it varies far less than QPS when the machine is busy.
{{end -}}
{{if or (has "ngtls") (has "ngh2") (has "ngnew") (has "hp") (has "cd")}}
| row | QPS median (range) | p99 latency ms | QPS × anchor | CPU µs/request | per core × anchor | target |
|---|---|---|---|---|---|---|
{{if has "ngtls"}}{{template "vs" (list "ngtls" "TLS keep-alive: nginx ssl + proxy_pass (anchor)" "ngtls" "") -}}
{{template "vs" (list "t1" "TLS keep-alive, scenario 1" "ngtls" "≥ 0.9×") -}}
{{template "vs" (list "t2" "TLS keep-alive, scenario 2" "ngtls" "≥ 0.9×")}}{{end -}}
{{if has "ngnew"}}{{template "vs" (list "ngnew" "full TLS handshake per request: nginx (anchor)" "ngnew" "") -}}
{{template "vs" (list "tnew" "full TLS handshake per request, scenario 1" "ngnew" "≥ 1.0×")}}{{end -}}
{{if has "ngh2"}}{{template "vs" (list "ngh2" "HTTP/2, 10 streams per connection: nginx http2 (anchor)" "ngh2" "") -}}
{{template "vs" (list "th2" "HTTP/2, 10 streams per connection, scenario 1" "ngh2" "≥ 1.0×")}}{{end -}}
{{if has "hp"}}{{template "vs" (list "hp" "cleartext: HAProxy (anchor)" "hp" "") -}}
{{template "vs" (list "s1" "cleartext, scenario 1 vs HAProxy" "hp" "≥ 1.0×") -}}
{{template "vs" (list "s2" "cleartext, scenario 2 vs HAProxy" "hp" "≥ 1.0×") -}}
{{template "vs" (list "hptls" "TLS: HAProxy (anchor)" "hptls" "") -}}
{{template "vs" (list "t1" "TLS, scenario 1 vs HAProxy" "hptls" "≥ 1.0×") -}}
{{template "vs" (list "t2" "TLS, scenario 2 vs HAProxy" "hptls" "≥ 1.0×")}}{{end -}}
{{if has "cd"}}{{template "vs" (list "cd" "cleartext: Caddy (anchor)" "cd" "") -}}
{{template "vs" (list "s1" "cleartext, scenario 1 vs Caddy" "cd" "") -}}
{{template "vs" (list "s2" "cleartext, scenario 2 vs Caddy" "cd" "") -}}
{{template "vs" (list "cdtls" "TLS: Caddy (anchor)" "cdtls" "") -}}
{{template "vs" (list "t1" "TLS, scenario 1 vs Caddy" "cdtls" "") -}}
{{template "vs" (list "t2" "TLS, scenario 2 vs Caddy" "cdtls" "")}}{{end}}
Each ratio is the median (range) of per-round ratios to the row's anchor; 'per core' is the anchor's CPU µs per
request over the row's. The HTTP/2 rows' p99 comes from h2load's --log-file.
{{end -}}
{{range $pct := list "50" "80"}}{{$ng := printf "fng%s" $pct}}{{$gw := printf "fgw%s" $pct}}{{if has $ng}}{{if eq $pct "50"}}
| fixed rate (linkgate bench, CO-corrected) | nginx req/s served | linkgate req/s served | nginx p99 ms | linkgate p99 ms | p99 × nginx | nginx p50 ms | linkgate p50 ms | CPU µs/request nginx, linkgate | target |
|---|---|---|---|---|---|---|---|---|---|
{{end}}| {{$pct}} % of nginx's capacity, scenario 1 | {{mr "%.0f" (vals $ng "rps")}} | {{mr "%.0f" (vals $gw "rps")}} | {{mr "%.3f" (vals $ng "p99")}} | {{mr "%.3f" (vals $gw "p99")}} | {{mr "%.2f" (per $gw $ng "p99")}} | {{mr "%.3f" (vals $ng "p50")}} | {{mr "%.3f" (vals $gw "p50")}} | {{mr "%.1f" (vals $ng "cpu")}}, {{mr "%.1f" (vals $gw "cpu")}} | ≤ 1.5× |
{{$go := printf "fgo%s" $pct}}{{if has $go}}| {{$pct}} %, scenario 1, OLD_REF | {{mr "%.0f" (vals $ng "rps")}} | {{mr "%.0f" (vals $go "rps")}} | {{mr "%.3f" (vals $ng "p99")}} | {{mr "%.3f" (vals $go "p99")}} | {{mr "%.2f" (per $go $ng "p99")}} | {{mr "%.3f" (vals $ng "p50")}} | {{mr "%.3f" (vals $go "p50")}} | {{mr "%.1f" (vals $ng "cpu")}}, {{mr "%.1f" (vals $go "cpu")}} | |
{{end}}{{end}}{{end -}}
{{if has "fng50"}}
Fixed-rate rows: nginx's capacity is the median of its wrk runs (nginx row); both servers are offered the same rate
(that share of it), in turn, each round; a server serving less than offered fell behind. The p99 ratio is the median
(range) of per-round ratios.{{if has "fgo50"}} This build's CPU per request × OLD_REF's: {{mr "%.3f" (per "fgw50" "fgo50" "cpu")}} at 50 %,
{{mr "%.3f" (per "fgw80" "fgo80" "cpu")}} at 80 % (per-round ratios).{{end}}
{{end -}}
{{with total "non2xx"}}
WARNING: {{printf "%.0f" .}} non-2xx responses
{{end -}}
TABLE
