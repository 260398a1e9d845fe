#!/usr/bin/env bash
# Load profiles for ghz against a running replica, each measured against the
# Health baseline, and each cleaning up what it created.
#
#   deploy/ghz/run.sh PROFILE...     PROFILE: health submit-pod schedule list-pods, or all
#
# Every profile is a ghz --config file beside this script (call, request
# count, concurrency, connections); these variables override them:
#   ADDR         replica address (default 127.0.0.1:7070)
#   TOTAL, CONCURRENCY, CONNECTIONS
#   NODES        nodes registered for the schedule profile (default 100)
#   LIST_PODS    pods stored for list-pods to page through (default 500)
#   OUT          directory for ghz's JSON reports (default: a new temporary one)
#
# Requests are generated up front into a JSON array that ghz walks round-robin
# (no per-call template rendering in the measurement), with a run id in every
# name so reruns never collide. Pods and nodes a profile created are deleted
# when it ends, also on failure or Ctrl-C, through the same API by ghz.
# With jq installed, a table compares each profile with the Health baseline.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ADDR=${ADDR:-127.0.0.1:7070}
NODES=${NODES:-100}
LIST_PODS=${LIST_PODS:-500}
RUN=${RUN:-r$(date +%s)}
RUN=${RUN,,} # names are DNS labels
OUT=${OUT:-$(mktemp -d -t berth-ghz-XXXXXX)}
NS=ghz
WORK=$(mktemp -d -t berth-ghz-data-XXXXXX)
CLEANUPS=()
trap 'cleanup; rm -rf "$WORK"' EXIT

command -v ghz >/dev/null || { echo "ghz not found: go install github.com/bojand/ghz/cmd/ghz@v0.120.0" >&2; exit 1; }

# overrides: ghz flags for the variables set in the environment.
overrides() {
	local o=()
	[[ -n ${TOTAL:-} ]] && o+=(--total "$TOTAL")
	[[ -n ${CONCURRENCY:-} ]] && o+=(--concurrency "$CONCURRENCY")
	[[ -n ${CONNECTIONS:-} ]] && o+=(--connections "$CONNECTIONS")
	echo "${o[@]}"
}

# total PROFILE: the request count the profile will make.
total() { echo "${TOTAL:-$(sed -n 's/^ *"total": *\([0-9]*\).*/\1/p' "$HERE/$1.json")}"; }

# pods NAMESPACE PREFIX COUNT: requests carrying pods PREFIX-0 ... PREFIX-(COUNT-1).
pods() {
	awk -v ns="$1" -v p="$2" -v n="$3" 'BEGIN {
	  printf "["
	  for (i = 0; i < n; i++) {
	    if (i) printf ","
	    printf "{\"pod\":{\"namespace\":\"%s\",\"name\":\"%s-%d\",\"containers\":[{\"name\":\"main\",\"image\":\"registry.example/app:1\",\"requests\":{\"cpu\":\"10\",\"memory\":\"16777216\"}}]}}", ns, p, i
	  }
	  printf "]"
	}'
}

# refs NAMESPACE PREFIX COUNT: DeletePod requests for the same pods.
refs() {
	awk -v ns="$1" -v p="$2" -v n="$3" 'BEGIN {
	  printf "["
	  for (i = 0; i < n; i++) { if (i) printf ","; printf "{\"namespace\":\"%s\",\"name\":\"%s-%d\"}", ns, p, i }
	  printf "]"
	}'
}

# nodes PREFIX COUNT [delete]: UpsertNode (or DeleteNode) requests. Each
# node is large enough that the schedule profile never runs out of room.
nodes() {
	awk -v p="$1" -v n="$2" -v del="${3:-}" 'BEGIN {
	  printf "["
	  for (i = 0; i < n; i++) {
	    if (i) printf ","
	    if (del) printf "{\"name\":\"%s-%d\"}", p, i
	    else printf "{\"node\":{\"name\":\"%s-%d\",\"allocatable\":{\"cpu\":\"1000000\",\"memory\":\"4398046511104\",\"pods\":\"100000\"}}}", p, i
	  }
	  printf "]"
	}'
}

# quietly CALL DATAFILE COUNT: unmeasured set-up or clean-up calls.
quietly() {
	ghz --insecure --call "$1" --data-file "$2" --total "$3" --concurrency 32 --connections 4 \
		--format summary --output /dev/null "$ADDR"
}

# Clean-ups run last registered, first run: pods before the nodes they are on.
cleanup() {
	local i
	for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${CLEANUPS[$i]}" || echo "clean-up failed: ${CLEANUPS[$i]}" >&2
	done
	CLEANUPS=()
}

# delete_pods_later PREFIX COUNT: register the deletion of those pods.
delete_pods_later() {
	local f="$WORK/delete-$1.json"
	refs "$NS" "$1" "$2" >"$f"
	CLEANUPS+=("echo 'deleting $2 pods $NS/$1-*'; quietly berth.v1.PodService.DeletePod '$f' $2")
}

# measure PROFILE [ghz flags...]: run the profile, report to $OUT/PROFILE.json.
measure() {
	local profile=$1
	shift
	echo "== $profile: $(total "$profile") calls to $ADDR"
	# shellcheck disable=SC2046 # overrides are words
	ghz --config "$HERE/$profile.json" $(overrides) "$@" --format json --output "$OUT/$profile.json" "$ADDR"
	summary "$profile"
}

summary() {
	command -v jq >/dev/null || { echo "report: $OUT/$1.json"; return; }
	jq -r '"\(.count) calls, \(.rps | floor) calls/s, p50 \(.latencyDistribution[] | select(.percentage == 50) | .latency / 1e6 | . * 100 | floor / 100) ms, p99 \(.latencyDistribution[] | select(.percentage == 99) | .latency / 1e6 | . * 100 | floor / 100) ms, errors \(.errorDistribution // {} | add // 0)"' "$OUT/$1.json"
}

run_health() { measure health; }

run_submit_pod() {
	local n prefix=$RUN-submit
	n=$(total submit-pod)
	delete_pods_later "$prefix" "$n"
	pods "$NS" "$prefix" "$n" >"$WORK/submit.json"
	measure submit-pod --data-file "$WORK/submit.json"
	cleanup
}

run_schedule() {
	local n prefix=$RUN-schedule nodeprefix=ghz-$RUN
	n=$(total schedule)
	nodes "$nodeprefix" "$NODES" >"$WORK/nodes.json"
	nodes "$nodeprefix" "$NODES" delete >"$WORK/nodes-delete.json"
	CLEANUPS+=("echo 'deleting $NODES nodes $nodeprefix-*'; quietly berth.v1.ClusterService.DeleteNode '$WORK/nodes-delete.json' $NODES")
	quietly berth.v1.ClusterService.UpsertNode "$WORK/nodes.json" "$NODES"
	delete_pods_later "$prefix" "$n"
	pods "$NS" "$prefix" "$n" >"$WORK/schedule.json"
	measure schedule --data-file "$WORK/schedule.json"
	cleanup
}

run_list_pods() {
	local prefix=$RUN-list
	# list-pods.json reads namespace ghz-list.
	NS=ghz-list delete_pods_later "$prefix" "$LIST_PODS"
	pods ghz-list "$prefix" "$LIST_PODS" >"$WORK/list.json"
	quietly berth.v1.PodService.SubmitPod "$WORK/list.json" "$LIST_PODS"
	measure list-pods
	cleanup
}

# ratios: each profile's throughput and latency against the Health baseline.
ratios() {
	command -v jq >/dev/null && [[ -f $OUT/health.json ]] || return 0
	echo
	local p
	{
	printf 'profile\tcalls/s\tvs health\tp50 ms\tvs health\tp99 ms\tvs health\n'
	for p in health submit-pod schedule list-pods; do
		[[ -f $OUT/$p.json ]] || continue
		jq -r --slurpfile h "$OUT/health.json" --arg p "$p" '
		  def q($r; $n): $r.latencyDistribution[] | select(.percentage == $n) | .latency / 1e6;
		  [$p, (.rps | floor), (.rps / $h[0].rps * 100 | floor / 100),
		   (q(.; 50) * 100 | floor / 100), (q(.; 50) / q($h[0]; 50) * 10 | floor / 10),
		   (q(.; 99) * 100 | floor / 100), (q(.; 99) / q($h[0]; 99) * 10 | floor / 10)]
		  | "\(.[0])\t\(.[1])\t\(.[2])x\t\(.[3])\t\(.[4])x\t\(.[5])\t\(.[6])x"' "$OUT/$p.json"
	done
	} | column -t -s $'\t'
}

[[ $# -gt 0 ]] || { sed -n '2,19p' "$0" >&2; exit 2; }
profiles=("$@")
[[ ${profiles[*]} == all ]] && profiles=(health submit-pod schedule list-pods)
for p in "${profiles[@]}"; do
	case $p in
	health) run_health ;;
	submit-pod) run_submit_pod ;;
	schedule) run_schedule ;;
	list-pods) run_list_pods ;;
	*) echo "unknown profile $p" >&2; exit 2 ;;
	esac
done
ratios
echo "reports: $OUT"
