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
#             scenarios (o1, o2), for before/after figures from one run
#   load      wrk -t2 -c16 -d${DURATION}, pinned to core $LOAD_CPU
#
# Scenario 1: the seed's route with no plugins. Scenario 2: limit-count
# (count 2000000000000, time_window 60, rejected_code 503, key remote_addr)
# + prometheus. Targets are measured round-robin (nginx, proto, s1, s2) ROUNDS times
# so machine noise hits all alike; the table gives medians and ranges, and
# the ratio to nginx is the median of per-round ratios.
#
# Environment: ROUNDS (2), DURATION (5s), CONNS (16), GW_CPU (0), LOAD_CPU (1),
# UPSTREAM_PORT (1980), OLD_REF (unset), KEEP (1 keeps the temp dir).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$LINKGATE_ROOT"

ROUNDS=${ROUNDS:-2} DURATION=${DURATION:-5s} CONNS=${CONNS:-16}
GW_CPU=${GW_CPU:-0} LOAD_CPU=${LOAD_CPU:-1} UPSTREAM_PORT=${UPSTREAM_PORT:-1980}
KEY=edd1c9f034335f136f87ad84b625c8f1
ECHO_MODULE=/usr/lib/nginx/modules/ngx_http_echo_module.so

for c in nginx wrk taskset flock curl; do command -v "$c" >/dev/null || die "$c not installed (apt-get install nginx-light libnginx-mod-http-echo wrk util-linux curl)"; done
[ -f "$ECHO_MODULE" ] || die "$ECHO_MODULE missing (apt-get install libnginx-mod-http-echo)"

tmp=$(mktemp -d /tmp/linkgate-bench-gateway.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ "${KEEP:-0}" = 1 ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

step "build linkgate and tools/gatewayproto"
go build -trimpath -o "$tmp/linkgate" ./cmd/linkgate
go build -trimpath -o "$tmp/gatewayproto" ./tools/gatewayproto
if [ -n "${OLD_REF:-}" ]; then
	step "build linkgate at $OLD_REF"
	git worktree add -q --detach "$tmp/old-src" "$OLD_REF"
	(cd "$tmp/old-src" && go build -trimpath -o "$tmp/linkgate-old" ./cmd/linkgate)
	git worktree remove --force "$tmp/old-src"
fi

gw_port=$(free_port)
ng_port=$(free_port)
prom_port=$(free_port)
proto_port=$(free_port)
old_port=$(free_port)
old_prom_port=$(free_port)

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
		location / {
			proxy_pass http://backend;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host \$http_host;
			proxy_set_header X-Real-IP \$remote_addr;
			proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Proto \$scheme;
			proxy_set_header X-Forwarded-Host \$host;
			proxy_set_header X-Forwarded-Port \$server_port;
		}
	}
}
CONF

step "start upstream (127.0.0.1:$UPSTREAM_PORT), nginx baseline (:$ng_port), linkgate gateway (:$gw_port)"
if (exec 3<>"/dev/tcp/127.0.0.1/$UPSTREAM_PORT") 2>/dev/null; then
	die "127.0.0.1:$UPSTREAM_PORT is already in use (set UPSTREAM_PORT)"
fi
taskset -c "$LOAD_CPU" nginx -p "$tmp" -c "$tmp/upstream.conf" & pids+=($!)
taskset -c "$GW_CPU" nginx -p "$tmp" -c "$tmp/nginx.conf" & pids+=($!)
GOMAXPROCS=1 taskset -c "$GW_CPU" "$tmp/linkgate" gateway --listen "127.0.0.1:$gw_port" \
	--prometheus-listen "127.0.0.1:$prom_port" --admin-key "$KEY" \
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
put_route() { # PORT BODY
	curl -sf "http://127.0.0.1:$1/apisix/admin/routes/1" -H "X-API-KEY: $KEY" -X PUT -d "$2" >/dev/null ||
		die "admin PUT failed"
	sleep 0.2
	[ "$(curl -s "http://127.0.0.1:$1/hello")" = 1234567890 ] || die "gateway on :$1 does not proxy /hello"
}
wait_tcp 127.0.0.1 "$proto_port" 10 || { cat "$tmp/proto.log"; die "gatewayproto did not start"; }
[ "$(curl -s "http://127.0.0.1:$ng_port/hello")" = 1234567890 ] || die "nginx baseline does not proxy /hello"
[ "$(curl -s "http://127.0.0.1:$proto_port/hello")" = 1234567890 ] || die "gatewayproto does not proxy /hello"
ng_worker=$(pgrep -P "$(cat "$tmp/nginx.pid")" | head -1)
[ -n "$ng_worker" ] || die "nginx baseline worker not found"

# cpu_ticks PID: user+system CPU time of a process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# wrk_run NAME URL PID: one pinned wrk run; appends "name qps avg_ms p99_ms non2xx
# cpu_us_per_request" to results. CPU per request (of PID, the process under
# test) is far less sensitive to a busy machine than QPS.
to_ms() { # 200.44us | 1.11ms | 2.01s → ms
	awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n = n; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'
}
wrk_run() {
	local name=$1 url=$2 pid=$3 out c0 c1
	c0=$(cpu_ticks "$pid")
	out=$(taskset -c "$LOAD_CPU" wrk -t2 -c"$CONNS" -d"$DURATION" --latency "$url")
	c1=$(cpu_ticks "$pid")
	local qps avg p99 bad reqs cpu
	qps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
	reqs=$(awk '/requests in/ { print $1 }' <<<"$out")
	cpu=$(awk -v d=$((c1 - c0)) -v n="$reqs" -v hz="$hz" 'BEGIN { printf "%.2f", d * 1e6 / hz / n }')
	avg=$(to_ms "$(awk '$1 == "Latency" { print $2; exit }' <<<"$out")")
	p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
	bad=$(awk '/Non-2xx or 3xx responses:/ { print $5 }' <<<"$out")
	printf '%-8s %10.0f %8.3f %8.3f %6s %8s\n' "$name" "$qps" "$avg" "$p99" "${bad:-0}" "$cpu" | tee -a "$tmp/results"
}

step "measure: $ROUNDS rounds of wrk -t2 -c$CONNS -d$DURATION per target (holding /tmp/linkgate-bench.lock)"
exec 9>/tmp/linkgate-bench.lock
flock 9
echo "target        qps   avg_ms   p99_ms non2xx cpu_us/req"
measure() { # NAME PORT PID: warm up 1 s, then one measured run
	taskset -c "$LOAD_CPU" wrk -t2 -c"$CONNS" -d1s "http://127.0.0.1:$2/hello" >/dev/null
	wrk_run "$1" "http://127.0.0.1:$2/hello" "$3"
}
for ((r = 1; r <= ROUNDS; r++)); do
	measure nginx "$ng_port" "$ng_worker"
	measure proto "$proto_port" "$proto_pid"
	put_route "$gw_port" "$route_plain"
	measure s1 "$gw_port" "$gw_pid"
	if [ -n "${OLD_REF:-}" ]; then
		put_route "$old_port" "$route_plain"
		measure o1 "$old_port" "$old_pid"
	fi
	put_route "$gw_port" "$route_plugins"
	measure s2 "$gw_port" "$gw_pid"
	if [ -n "${OLD_REF:-}" ]; then
		put_route "$old_port" "$route_plugins"
		measure o2 "$old_port" "$old_pid"
	fi
done
flock -u 9

step "result (linkgate $(git describe --always --dirty 2>/dev/null || echo dev), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ))"
python3 - "$tmp/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for name, qps, avg, p99, bad, cpu in rows:
    by.setdefault(name, []).append((float(qps), float(avg), float(p99), int(bad), float(cpu)))
rounds = len(by["nginx"])
med = statistics.median
def rng(xs, fmt):
    return f"{fmt.format(med(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"
def ratio(name, col, invert=False):
    if name == "nginx":
        return "1.00"
    rs = [(by["nginx"][i][col] / by[name][i][col]) if invert else (by[name][i][col] / by["nginx"][i][col]) for i in range(rounds)]
    return rng(rs, "{:.2f}")
labels = {"nginx": "nginx proxy_pass (anchor)", "proto": "bare fasthttp proxy (tools/gatewayproto)",
          "s1": "1: no plugins", "s2": "2: limit-count + prometheus",
          "o1": "1: no plugins, OLD_REF", "o2": "2: limit-count + prometheus, OLD_REF"}
targets = {"s1": "≥ 1.0×", "s2": "≥ 0.9×"}
print("| scenario | QPS median (range) | avg latency ms | p99 latency ms | QPS × nginx | CPU µs/request | QPS per core (10⁶/CPU µs) | per core × nginx | target |")
print("|---|---|---|---|---|---|---|---|---|")
for name in [n for n in ("nginx", "proto", "s1", "o1", "s2", "o2") if n in by]:
    r = by[name]
    cpu = [x[4] for x in r]
    print(f"| {labels[name]} | {rng([x[0] for x in r], '{:,.0f}')} | {rng([x[1] for x in r], '{:.3f}')} | "
          f"{rng([x[2] for x in r], '{:.3f}')} | {ratio(name, 0)} | {rng(cpu, '{:.2f}')} | "
          f"{med([1e6 / c for c in cpu]):,.0f} | {ratio(name, 4, invert=True)} | {targets.get(name, '')} |")
print(f"\n{rounds} rounds; ratios are medians (ranges) of per-round ratios. 'QPS per core' divides a second by the")
print("CPU time the process under test (gateway, or the nginx worker) spent per request: it is what one fully")
print("used core would serve, and it varies far less than QPS when the machine is busy.")
bad = sum(x[3] for r in by.values() for x in r)
if bad:
    print(f"\nWARNING: {bad} non-2xx responses")
PY
