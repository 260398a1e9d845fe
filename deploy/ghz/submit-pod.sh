#!/usr/bin/env bash
# Load-test SubmitPod with unique pods against a local berth (make run).
# Every request carries a fresh uuid in the pod name, so each call is a
# durable create, not an idempotent replay. Bounded: --total requests.
set -euo pipefail
ADDR=${ADDR:-127.0.0.1:7070}
TOTAL=${TOTAL:-200000}
CONCURRENCY=${CONCURRENCY:-256}
CONNECTIONS=${CONNECTIONS:-8}
exec ghz --insecure \
  --call berth.v1.PodService/SubmitPod \
  --total "$TOTAL" --concurrency "$CONCURRENCY" --connections "$CONNECTIONS" \
  --data '{"pod":{"namespace":"ghz","name":"p-{{newUUID}}","containers":[{"name":"main","image":"registry.example/app:1","requests":{"cpu":"10","memory":"16777216"}}]}}' \
  "$ADDR"
