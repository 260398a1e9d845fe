"""The client's retry and watch logic against an in-process fake server."""

import threading
import time
import unittest
from concurrent import futures

import grpc
from google.protobuf import any_pb2, duration_pb2

from berth.v1 import (
    pod_service_pb2 as pod_pb,
    pod_service_pb2_grpc as pod_grpc,
    scheduler_service_pb2 as sched_pb,
    scheduler_service_pb2_grpc as sched_grpc,
    types_pb2 as types,
)
import berth_client
from berth_client import rpc_status_pb2
from berth_client.watch import _Cursor


def details(code, message, *infos):
    """The trailer a Go server sends with status details."""
    st = rpc_status_pb2.Status(code=code.value[0], message=message)
    for type_name, msg in infos:
        st.details.append(any_pb2.Any(type_url="type.googleapis.com/" + type_name,
                                      value=msg.SerializeToString()))
    return (("grpc-status-details-bin", st.SerializeToString()),)


def abort(context, code, message, *infos):
    context.set_trailing_metadata(details(code, message, *infos))
    context.abort(code, message)


def retry_info(seconds):
    return ("google.rpc.RetryInfo", rpc_status_pb2.RetryInfo(
        retry_delay=duration_pb2.Duration(seconds=int(seconds), nanos=int(seconds % 1 * 1e9))))


def error_info(reason, **metadata):
    return ("google.rpc.ErrorInfo", rpc_status_pb2.ErrorInfo(reason=reason, metadata=metadata))


def event(rev, name):
    return sched_pb.WatchBindingsResponse(event=sched_pb.BindingEvent(
        type=sched_pb.BINDING_EVENT_TYPE_BOUND, namespace="ns", name=name, uid=name, node_name="n1", revision=rev))


class FakePods(pod_grpc.PodServiceServicer):
    """SubmitPod answers with whatever the test queued, then succeeds."""

    def __init__(self):
        self.failures = []  # (code, message, infos) per call, in order
        self.calls = 0
        self.metadata = []

    def SubmitPod(self, request, context):
        self.calls += 1
        self.metadata.append(dict(context.invocation_metadata()))
        if self.failures:
            code, message, infos = self.failures.pop(0)
            abort(context, code, message, *infos)
        return pod_pb.SubmitPodResponse(pod=request.pod, revision=42)


class FakeWatch(sched_grpc.SchedulerServiceServicer):
    """Each stream plays the next script: events, then an optional abort."""

    def __init__(self):
        self.scripts = []
        self.froms = []

    def WatchBindings(self, request, context):
        self.froms.append(request.from_revision)
        if not self.scripts:
            return
        responses, failure = self.scripts.pop(0)
        yield from responses
        if failure is not None:
            code, message, infos = failure
            abort(context, code, message, *infos)
        # A script without a failure leaves the stream open until cancelled.
        stop = threading.Event()
        context.add_callback(stop.set)
        stop.wait(30)


class FakeServerTest(unittest.TestCase):
    def setUp(self):
        self.pods = FakePods()
        self.watch = FakeWatch()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pod_grpc.add_PodServiceServicer_to_server(self.pods, self.server)
        sched_grpc.add_SchedulerServiceServicer_to_server(self.watch, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.addr = "127.0.0.1:%d" % port

    def tearDown(self):
        self.server.stop(None)

    def client(self, **kw):
        kw.setdefault("backoff_base", 0)
        c = berth_client.Client(self.addr, **kw)
        self.addCleanup(c.close)
        return c


class RetryTest(FakeServerTest):
    POD = types.Pod(namespace="ns", name="p")

    def test_retry_info_is_honoured(self):
        asked = 0.3
        self.pods.failures = [(grpc.StatusCode.RESOURCE_EXHAUSTED, "overloaded", [retry_info(asked)])]
        start = time.monotonic()
        _, rev = self.client().submit_pod(self.POD, timeout=10)
        self.assertEqual(rev, 42)
        self.assertEqual(self.pods.calls, 2)
        # A lower bound only: a sleep never ends early.
        self.assertGreaterEqual(time.monotonic() - start, asked)

    def test_gives_up_with_the_servers_answer_before_the_deadline(self):
        self.pods.failures = [(grpc.StatusCode.UNAVAILABLE, "storage unavailable", [retry_info(60)])]
        with self.assertRaises(grpc.RpcError) as cm:
            self.client().submit_pod(self.POD, timeout=2)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.pods.calls, 1)

    def test_other_codes_are_not_retried(self):
        self.pods.failures = [(grpc.StatusCode.INVALID_ARGUMENT, "bad pod", [])]
        with self.assertRaises(grpc.RpcError) as cm:
            self.client().submit_pod(self.POD, timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(self.pods.calls, 1)

    def test_attempts_are_bounded(self):
        self.pods.failures = [(grpc.StatusCode.UNAVAILABLE, "down", [])] * 5
        with self.assertRaises(grpc.RpcError):
            self.client(max_attempts=3).submit_pod(self.POD, timeout=10)
        self.assertEqual(self.pods.calls, 3)

    def test_bearer_token_is_sent(self):
        self.client(token="s3cret").submit_pod(self.POD, timeout=10)
        self.assertEqual(self.pods.metadata[0].get("authorization"), "Bearer s3cret")


class WatchTest(FakeServerTest):
    def collect(self, w, n):
        got = []
        for ev in w:
            got.append((ev.revision, ev.name))
            if len(got) == n:
                w.cancel()
        return got

    def test_resumes_after_fell_behind_and_disconnect_without_repeats(self):
        fell = (grpc.StatusCode.RESOURCE_EXHAUSTED, "reader too slow",
                [error_info("WATCH_FELL_BEHIND", resume_revision="5")])
        self.watch.scripts = [
            ([event(5, "a"), event(6, "b")], fell),
            ([event(6, "b"), event(7, "c")], (grpc.StatusCode.UNAVAILABLE, "restarting", [])),
            ([event(7, "c"), event(8, "d")], None),
        ]
        got = self.collect(self.client().watch_bindings(4), 4)
        self.assertEqual(got, [(5, "a"), (6, "b"), (7, "c"), (8, "d")])
        # Revision 6 is asked for again after the cut: the server's resume
        # revision is below the client's own point.
        self.assertEqual(self.watch.froms, [4, 5, 6])

    def test_compacted_revision_raises(self):
        self.watch.scripts = [([], (grpc.StatusCode.FAILED_PRECONDITION, "compacted",
                                    [error_info("REVISION_COMPACTED", compact_revision="90")]))]
        with self.assertRaises(berth_client.CompactedError) as cm:
            self.collect(self.client().watch_bindings(3), 1)
        self.assertEqual(cm.exception.oldest_revision, 90)

    def test_other_errors_raise(self):
        self.watch.scripts = [([], (grpc.StatusCode.PERMISSION_DENIED, "no", []))]
        with self.assertRaises(grpc.RpcError) as cm:
            self.collect(self.client().watch_bindings(3), 1)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)


class CursorTest(unittest.TestCase):
    def test_listing_cut_short_is_redone_from_zero_skipping_what_was_seen(self):
        c = _Cursor(0)
        a = event(3, "a").event
        c.delivered(a)
        self.assertEqual(c.resume_from(), 0)
        self.assertTrue(c.seen(a))
        c.progress(10)
        self.assertEqual(c.resume_from(), 10)
        self.assertFalse(c.seen(event(11, "b").event))


if __name__ == "__main__":
    unittest.main()
