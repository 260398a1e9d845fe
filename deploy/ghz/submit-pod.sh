#!/usr/bin/env bash
# Load-test SubmitPod against a running berth (make run); kept for old
# habits: it is `run.sh submit-pod`, which also deletes the pods afterwards.
exec "$(dirname "${BASH_SOURCE[0]}")/run.sh" submit-pod
