"""Drives a real Berth server from Python: the Go test
clients/python/python_test.go starts one and runs this script against it.

Registers a node, submits a pod with submit_and_wait and checks it bound,
resubmits it (the first-program trap: its binding is in the past) and
checks the binding comes back at once, then watches and sees the BOUND
event. Exits 0 when every check passed.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from berth.v1 import scheduler_service_pb2 as sched  # noqa: E402
from berth.v1 import types_pb2 as types  # noqa: E402
import berth_client  # noqa: E402

TIMEOUT = 30.0


def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)
    print("ok:", what)


def expect_refused(args):
    import grpc
    with berth_client.Client(args.addr, ca_cert=args.ca_cert, token=args.token) as c:
        try:
            c.upsert_node(types.Node(name="intruder", allocatable={"cpu": 1}), timeout=TIMEOUT)
            check(False, "a caller without identity is refused")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.UNAUTHENTICATED,
                  "a caller without identity is refused (%s)" % e.code())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default=berth_client.DEFAULT_ADDR)
    ap.add_argument("--ca-cert", help="PEM CA bundle: dial over TLS")
    ap.add_argument("--cert", help="PEM client certificate, for mutual TLS")
    ap.add_argument("--key", help="PEM key of --cert")
    ap.add_argument("--token", help="bearer token")
    ap.add_argument("--expect-refused", action="store_true",
                    help="only check that the server refuses the caller as unauthenticated")
    args = ap.parse_args()
    if args.expect_refused:
        expect_refused(args)
        return

    with berth_client.Client(args.addr, ca_cert=args.ca_cert, cert=args.cert, key=args.key,
                             token=args.token) as c:
        node, _ = c.upsert_node(types.Node(
            name="py-node", allocatable={"cpu": 2000, "memory": 4 << 30, "pods": 20}), timeout=TIMEOUT)
        check(node.name == "py-node", "node registered")

        pod = types.Pod(namespace="py", name="web", containers=[
            types.Container(name="main", image="registry.example/web:1", requests={"cpu": 250})])
        bound = c.submit_and_wait(pod, timeout=TIMEOUT)
        check(bound.status.phase == types.POD_PHASE_BOUND and bound.node_name == "py-node",
              "submit_and_wait: bound to py-node (%s on %r)" % (
                  types.PodPhase.Name(bound.status.phase), bound.node_name))

        again = c.submit_and_wait(pod, timeout=TIMEOUT)
        check(again.uid == bound.uid and again.node_name == "py-node", "resubmit: the binding at once")

        huge = types.Pod(namespace="py", name="huge", containers=[
            types.Container(name="main", requests={"cpu": 1_000_000})])
        try:
            c.submit_and_wait(huge, timeout=TIMEOUT)
            check(False, "an oversized pod is unschedulable")
        except berth_client.UnschedulableError as e:
            check(e.pod.status.phase == types.POD_PHASE_UNSCHEDULABLE, "an oversized pod is unschedulable")

        # From 0 the watch lists every bound pod: the one just bound is there.
        with c.watch_bindings(0) as w:
            for ev in w:
                if ev.type == sched.BINDING_EVENT_TYPE_BOUND and ev.name == "web" and ev.uid == bound.uid:
                    check(ev.node_name == "py-node", "watch: BOUND event on py-node")
                    break

        # A wait that starts after the submit, from the pod as the submit
        # returned it (pending) and its revision: a binding made in between
        # is not missed.
        second = types.Pod(namespace="py", name="api", containers=[
            types.Container(name="main", requests={"cpu": 250})])
        stored, rev = c.submit_pod(second, timeout=TIMEOUT)
        late = c.wait_for_binding(stored, rev, timeout=TIMEOUT)
        check(late.node_name == "py-node", "wait_for_binding from the submit's revision")

        # The BOUND event is on a watch from the revision of the submit.
        with c.watch_bindings(rev) as w:
            for ev in w:
                if ev.type == sched.BINDING_EVENT_TYPE_BOUND and ev.uid == stored.uid:
                    check(ev.revision > rev and ev.node_name == "py-node", "watch from the submit: BOUND event")
                    break

        ex = c.explain(pod=types.Pod(namespace="py", name="dry", containers=[
            types.Container(name="main", requests={"cpu": 250})]), timeout=TIMEOUT)
        check(ex.chosen_node_name == "py-node", "explain: py-node would be chosen")
        replicas, shards = c.list_replicas(timeout=TIMEOUT)
        check(len(replicas) == 1 and shards > 0, "list_replicas: one replica owning the shards")

        # The orchestrator's report: the pod started.
        running, _ = c.confirm_binding(late.namespace, late.name, late.uid, "py-node", timeout=TIMEOUT)
        check(running.status.phase == types.POD_PHASE_RUNNING, "confirm_binding: RUNNING")
    print("e2e passed")


if __name__ == "__main__":
    main()
