#!/usr/bin/env bash
# A local Berth cluster on loopback, without Docker or an etcd binary:
# three `berth etcd` members and three `berth serve` replicas.
#
#   deploy/local-cluster.sh start     build bin/berth if needed, start all six, wait until they serve
#   deploy/local-cluster.sh status    which processes run
#   deploy/local-cluster.sh stop      SIGTERM all (SIGKILL after 30s each); data is kept
#   deploy/local-cluster.sh clean     stop, then delete the data and logs
#
# Replicas listen on 127.0.0.1:7070, :7080 and :7090 (metrics on :7071,
# :7081, :7091); etcd clients on 127.0.0.1:2379, :2389, :2399. Override
# with BERTH_PORT_BASE and ETCD_PORT_BASE (steps of 10). State lives in
# LOCAL_CLUSTER_DIR (default ./local-cluster).
#
# The replicas serve mutual TLS: `berth certs` makes a CA, a server
# certificate and an "admin" client certificate in $LOCAL_CLUSTER_DIR/certs,
# and a policy granting admin the admin role (`start` prints the berthctl
# environment). BERTH_TLS=0 opts out: plaintext, every caller may do
# everything (loopback only, so no --insecure is needed).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${LOCAL_CLUSTER_DIR:-$ROOT/local-cluster}
BERTH=${BERTH_BIN:-$ROOT/bin/berth}
BERTH_PORT_BASE=${BERTH_PORT_BASE:-7070}
ETCD_PORT_BASE=${ETCD_PORT_BASE:-2379}
LEASE_TTL=${LEASE_TTL:-10s}
BERTH_TLS=${BERTH_TLS:-1}
CERTS=$DIR/certs
MEMBERS=(e1 e2 e3)
REPLICAS=(berth1 berth2 berth3)

etcd_client() { echo "127.0.0.1:$((ETCD_PORT_BASE + 10 * $1))"; }
etcd_peer() { echo "127.0.0.1:$((ETCD_PORT_BASE + 10 * $1 + 1))"; }
berth_addr() { echo "127.0.0.1:$((BERTH_PORT_BASE + 10 * $1))"; }
berth_metrics() { echo "127.0.0.1:$((BERTH_PORT_BASE + 10 * $1 + 1))"; }

running() { [[ -f $DIR/pids/$1 ]] && kill -0 "$(cat "$DIR/pids/$1")" 2>/dev/null; }

# launch NAME ARGS...: start bin/berth ARGS in the background, logging to
# $DIR/logs/NAME.log.
launch() {
	local name=$1
	shift
	if running "$name"; then
		echo "$name already running (pid $(cat "$DIR/pids/$name"))"
		return
	fi
	nohup "$BERTH" "$@" >>"$DIR/logs/$name.log" 2>&1 &
	echo $! >"$DIR/pids/$name"
	echo "started $name (pid $!)"
}

# wait_http NAME URL [CURL ARGS...]: poll URL for up to 60s; fail if NAME exits.
wait_http() {
	local name=$1 url=$2
	shift 2
	for _ in $(seq 1 120); do
		if curl -fsS -o /dev/null --max-time 1 "$@" "$url"; then
			return 0
		fi
		if ! running "$name"; then
			echo "$name exited; last log lines:" >&2
			tail -n 20 "$DIR/logs/$name.log" >&2
			return 1
		fi
		sleep 0.5
	done
	echo "$name not ready after 60s ($url); see $DIR/logs/$name.log" >&2
	return 1
}

start() {
	if [[ ! -x $BERTH ]]; then
		(cd "$ROOT" && go build -o "$BERTH" ./cmd/berth)
	fi
	mkdir -p "$DIR/pids" "$DIR/logs"
	local cluster="" endpoints="" i
	for i in "${!MEMBERS[@]}"; do
		cluster+="${cluster:+,}${MEMBERS[$i]}=http://$(etcd_peer "$i")"
		endpoints+="${endpoints:+,}http://$(etcd_client "$i")"
	done
	for i in "${!MEMBERS[@]}"; do
		launch "${MEMBERS[$i]}" etcd --name "${MEMBERS[$i]}" --data-dir "$DIR/${MEMBERS[$i]}.etcd" \
			--listen-client "$(etcd_client "$i")" --listen-peer "$(etcd_peer "$i")" \
			--initial-cluster "$cluster" --initial-cluster-state new --max-txn-ops 1024
	done
	for i in "${!MEMBERS[@]}"; do
		wait_http "${MEMBERS[$i]}" "http://$(etcd_client "$i")/health"
	done
	local tls_flags=() scheme=http curl_tls=() ctl_env=""
	if [[ $BERTH_TLS != 0 ]]; then
		[[ -f $CERTS/server.crt ]] || "$BERTH" certs --dir "$CERTS" --clients admin
		[[ -f $CERTS/policy.yaml ]] || printf 'grants:\n  - {identity: admin, role: admin}\n' >"$CERTS/policy.yaml"
		tls_flags=(--tls-cert "$CERTS/server.crt" --tls-key "$CERTS/server.key" --client-ca "$CERTS/ca.crt" --policy "$CERTS/policy.yaml")
		scheme=https
		curl_tls=(--cacert "$CERTS/ca.crt" --cert "$CERTS/admin.crt" --key "$CERTS/admin.key")
		ctl_env="BERTH_CACERT=$CERTS/ca.crt BERTH_CERT=$CERTS/admin.crt BERTH_KEY=$CERTS/admin.key "
	fi
	for i in "${!REPLICAS[@]}"; do
		launch "${REPLICAS[$i]}" serve --replica-id "${REPLICAS[$i]}" --listen "$(berth_addr "$i")" \
			--metrics-listen "$(berth_metrics "$i")" --etcd-endpoints "$endpoints" --lease-ttl "$LEASE_TTL" "${tls_flags[@]}"
	done
	for i in "${!REPLICAS[@]}"; do
		wait_http "${REPLICAS[$i]}" "$scheme://$(berth_metrics "$i")/metrics" "${curl_tls[@]}"
	done
	echo
	echo "etcd:     $endpoints"
	echo "replicas: $(berth_addr 0), $(berth_addr 1), $(berth_addr 2)"
	echo "try:      ${ctl_env}BERTH_ADDR=$(berth_addr 0) bin/berthctl node list"
}

stop() {
	local name pid
	# Replicas first, so they leave etcd cleanly.
	for name in "${REPLICAS[@]}" "${MEMBERS[@]}"; do
		running "$name" || { rm -f "$DIR/pids/$name"; continue; }
		pid=$(cat "$DIR/pids/$name")
		kill -TERM "$pid"
		for _ in $(seq 1 60); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "$name did not stop in 30s; killing it" >&2
			kill -KILL "$pid"
		fi
		rm -f "$DIR/pids/$name"
		echo "stopped $name"
	done
}

status() {
	local name
	for name in "${MEMBERS[@]}" "${REPLICAS[@]}"; do
		if running "$name"; then
			echo "$name running (pid $(cat "$DIR/pids/$name"))"
		else
			echo "$name stopped"
		fi
	done
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
clean)
	stop
	rm -rf "$DIR"
	;;
*)
	sed -n '2,18p' "$0" >&2
	exit 2
	;;
esac
