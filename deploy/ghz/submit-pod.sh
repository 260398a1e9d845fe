#!/usr/bin/env bash
# Load-test SubmitPod with unique pods against a running berth (make run).
#
# Every request is a durable create of a pod never seen before: the pods are
# generated up front into a JSON array that ghz walks round-robin, with a run
# id in every name so reruns against the same server stay unique. Generating
# them up front keeps ghz's own per-request templating cost (a template
# render and a JSON parse per call) out of the measurement.
# Bounded: exactly TOTAL requests, then ghz exits.
set -euo pipefail
ADDR=${ADDR:-127.0.0.1:7070}
TOTAL=${TOTAL:-200000}
CONCURRENCY=${CONCURRENCY:-256}
CONNECTIONS=${CONNECTIONS:-8}
RUN=${RUN:-$(date +%s)}
DATA=$(mktemp --suffix=.json)
trap 'rm -f "$DATA"' EXIT

awk -v n="$TOTAL" -v run="$RUN" 'BEGIN {
  printf "["
  for (i = 0; i < n; i++) {
    if (i) printf ","
    printf "{\"pod\":{\"namespace\":\"ghz\",\"name\":\"r%s-%d\",\"containers\":[{\"name\":\"main\",\"image\":\"registry.example/app:1\",\"requests\":{\"cpu\":\"10\",\"memory\":\"16777216\"}}]}}", run, i
  }
  printf "]"
}' > "$DATA"

ghz --insecure \
  --call berth.v1.PodService/SubmitPod \
  --total "$TOTAL" --concurrency "$CONCURRENCY" --connections "$CONNECTIONS" \
  --data-file "$DATA" \
  "$ADDR"
