"""The typed Python client of the Berth scheduling service."""

import threading
import time

import grpc

from berth.v1 import (
    cluster_service_pb2 as cluster_pb,
    cluster_service_pb2_grpc as cluster_grpc,
    pod_service_pb2 as pod_pb,
    pod_service_pb2_grpc as pod_grpc,
    scheduler_service_pb2 as sched_pb,
    scheduler_service_pb2_grpc as sched_grpc,
    types_pb2 as types,
)
from berth_client.errors import CompactedError, UnschedulableError
from berth_client.retry import Backoff, Stop, call_with_retry
from berth_client.watch import Watch

#: Where a Berth server listens unless told otherwise.
DEFAULT_ADDR = "127.0.0.1:7070"
#: The most pods the server takes in one SubmitPods call.
MAX_SUBMIT_BATCH = 1000

_BOUND_OR_LATER = frozenset({
    types.POD_PHASE_BOUND, types.POD_PHASE_RUNNING,
    types.POD_PHASE_SUCCEEDED, types.POD_PHASE_FAILED,
})


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class Client:
    """One gRPC channel to a Berth server; safe to share between threads.

    Plaintext by default. ``ca_cert`` (PEM file; None trusts the system
    roots when ``tls`` is set), ``cert`` and ``key`` (both or neither, for
    mutual TLS) select TLS, as does ``tls=True``. ``token`` sends
    "authorization: Bearer <token>" with every call. Unary calls failing
    with UNAVAILABLE or RESOURCE_EXHAUSTED are tried up to
    ``max_attempts`` times in all, with exponential backoff from
    ``backoff_base`` up to ``backoff_max`` seconds, never sooner than a
    server's RetryInfo asks and never past the call's ``timeout``.
    """

    def __init__(self, addr=DEFAULT_ADDR, *, tls=False, ca_cert=None, cert=None, key=None,
                 token=None, max_attempts=5, backoff_base=0.1, backoff_max=5.0, options=None):
        if (cert is None) != (key is None):
            raise ValueError("a client certificate needs both cert and key")
        if tls or ca_cert or cert:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(ca_cert) if ca_cert else None,
                private_key=_read(key) if key else None,
                certificate_chain=_read(cert) if cert else None,
            )
            self._channel = grpc.secure_channel(addr, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(addr, options=options)
        # The token goes as call metadata rather than call credentials, so it
        # also reaches a plaintext server on loopback.
        self._metadata = (("authorization", "Bearer " + token),) if token else None
        self._max_attempts = max(int(max_attempts), 1)
        self.backoff = Backoff(backoff_base, backoff_max)
        #: The generated stubs, for anything the typed methods do not cover.
        self.cluster = cluster_grpc.ClusterServiceStub(self._channel)
        self.pods = pod_grpc.PodServiceStub(self._channel)
        self.scheduler = sched_grpc.SchedulerServiceStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, method, request, timeout=None):
        """Calls a unary stub method with the client's retries and token."""
        return call_with_retry(method, request, timeout=timeout, max_attempts=self._max_attempts,
                               backoff=self.backoff, metadata=self._metadata)

    # Nodes.

    def upsert_node(self, node, timeout=None):
        """Creates node or replaces its spec; returns (node as stored, revision)."""
        r = self.call(self.cluster.UpsertNode, cluster_pb.UpsertNodeRequest(node=node), timeout)
        return r.node, r.revision

    def delete_node(self, name, timeout=None):
        """Removes a node; pods bound to it stay bound. Returns the revision."""
        return self.call(self.cluster.DeleteNode, cluster_pb.DeleteNodeRequest(name=name), timeout).revision

    def get_node(self, name, timeout=None):
        """Returns (node, usage): what the pods on it request."""
        r = self.call(self.cluster.GetNode, cluster_pb.GetNodeRequest(name=name), timeout)
        return r.node, r.usage

    def list_nodes(self, timeout=None):
        """Yields every node in name order, page by page."""
        token = ""
        while True:
            r = self.call(self.cluster.ListNodes, cluster_pb.ListNodesRequest(page_token=token), timeout)
            yield from r.nodes
            if not r.next_page_token:
                return
            token = r.next_page_token

    def renew_node_lease(self, name, timeout=None):
        """Keeps a leased node reachable; returns (ttl_seconds, restored)."""
        r = self.call(self.cluster.RenewNodeLease, cluster_pb.RenewNodeLeaseRequest(name=name), timeout)
        return r.ttl_seconds, r.restored

    # Pods.

    def submit_pod(self, pod, timeout=None):
        """Stores pod for scheduling; returns (pod as stored, revision).

        Resubmitting an identical pod returns the stored one, in its current
        phase, with the revision of the original write.
        """
        r = self.call(self.pods.SubmitPod, pod_pb.SubmitPodRequest(pod=pod), timeout)
        return r.pod, r.revision

    def submit_pods(self, pods, timeout=None):
        """Submits many pods, MAX_SUBMIT_BATCH per call; returns one
        SubmitPodResult each, in order (a pod's own failure is in its
        result's code and message)."""
        results = []
        pods = list(pods)
        for start in range(0, len(pods), MAX_SUBMIT_BATCH):
            batch = pods[start:start + MAX_SUBMIT_BATCH]
            r = self.call(self.pods.SubmitPods, pod_pb.SubmitPodsRequest(pods=batch), timeout)
            results.extend(r.results)
        return results

    def get_pod(self, namespace, name, timeout=None):
        return self.call(self.pods.GetPod, pod_pb.GetPodRequest(namespace=namespace, name=name), timeout).pod

    def delete_pod(self, namespace, name, uid="", timeout=None):
        """Removes a pod (only incarnation uid, if given); returns the revision."""
        req = pod_pb.DeletePodRequest(namespace=namespace, name=name, uid=uid)
        return self.call(self.pods.DeletePod, req, timeout).revision

    def list_pods(self, namespace="", phase=0, node_name="", timeout=None):
        """Yields every matching pod in namespace/name order, page by page."""
        token = ""
        while True:
            req = pod_pb.ListPodsRequest(namespace=namespace, phase=phase, node_name=node_name, page_token=token)
            r = self.call(self.pods.ListPods, req, timeout)
            yield from r.pods
            if not r.next_page_token:
                return
            token = r.next_page_token

    def update_pod(self, namespace, name, uid="", scheduling_gates=None, priority=None, timeout=None):
        """Changes a pending pod's scheduling gates (None: unchanged; [] removes
        them all) or priority (None: unchanged); returns (pod, revision)."""
        req = pod_pb.UpdatePodRequest(namespace=namespace, name=name, uid=uid)
        if scheduling_gates is not None:
            req.scheduling_gates.extend(scheduling_gates)
            req.update_scheduling_gates = True
        if priority is not None:
            req.priority = priority
        r = self.call(self.pods.UpdatePod, req, timeout)
        return r.pod, r.revision

    # The orchestrator's reports, keyed by uid and idempotent.

    def confirm_binding(self, namespace, name, uid, node_name="", timeout=None):
        """The bound pod started: it becomes RUNNING. Returns (pod, revision)."""
        req = pod_pb.ConfirmBindingRequest(namespace=namespace, name=name, uid=uid, node_name=node_name)
        r = self.call(self.pods.ConfirmBinding, req, timeout)
        return r.pod, r.revision

    def reject_binding(self, namespace, name, uid, node_name="", reason="", timeout=None):
        """The node could not start the pod: it is scheduled again, not onto
        that node until the node changes. Returns (pod, revision)."""
        req = pod_pb.RejectBindingRequest(namespace=namespace, name=name, uid=uid,
                                          node_name=node_name, reason=reason)
        r = self.call(self.pods.RejectBinding, req, timeout)
        return r.pod, r.revision

    def complete_pod(self, namespace, name, uid, phase, message="", timeout=None):
        """The pod finished (POD_PHASE_SUCCEEDED or POD_PHASE_FAILED); what it
        held is freed. Returns (pod, revision)."""
        req = pod_pb.CompletePodRequest(namespace=namespace, name=name, uid=uid, phase=phase, message=message)
        r = self.call(self.pods.CompletePod, req, timeout)
        return r.pod, r.revision

    # Scheduling.

    def schedule(self, pod, timeout=None):
        """Submits pod and has the server wait, up to timeout, for its
        decision; returns (pod, revision) with the pod BOUND or
        UNSCHEDULABLE. Fails with DEADLINE_EXCEEDED (the pod stays queued)
        when no decision comes in time."""
        r = self.call(self.scheduler.Schedule, sched_pb.ScheduleRequest(pod=pod), timeout)
        return r.pod, r.revision

    def explain(self, pod=None, namespace="", name="", timeout=None):
        """Dry-runs pod (inline), or the stored pending pod namespace/name,
        against the live cluster; returns the ExplainResponse."""
        if pod is not None:
            req = sched_pb.ExplainRequest(pod=pod)
        else:
            req = sched_pb.ExplainRequest(existing=sched_pb.PodReference(namespace=namespace, name=name))
        return self.call(self.scheduler.Explain, req, timeout)

    def list_replicas(self, timeout=None):
        """Returns (replicas, shard_count)."""
        r = self.call(self.scheduler.ListReplicas, sched_pb.ListReplicasRequest(), timeout)
        return list(r.replicas), r.shard_count

    # Binding.

    def watch_bindings(self, from_revision=0):
        """A Watch of binding events after from_revision; iterate over it,
        and cancel() it (or use it as a context manager) to stop."""
        return Watch(self.scheduler, from_revision, self.backoff, self._metadata)

    def submit_and_wait(self, pod, timeout=None, poll_interval=0.5):
        """Submits pod and waits until the scheduler has decided it.

        Returns the pod as stored once bound (or running, or finished);
        raises UnschedulableError when no node fits, and TimeoutError when
        timeout (seconds) passes first. A
        resubmitted pod that is already bound returns at once.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        stored, revision = self.submit_pod(pod, timeout)
        return self.wait_for_binding(stored, revision, _left(deadline), poll_interval)

    def wait_for_binding(self, stored, revision, timeout=None, poll_interval=0.5):
        """Waits for the decision on stored, the pod as a write at revision
        returned it, with the results of submit_and_wait.

        Race-free: the watch starts at the write's revision, not at "now",
        so a binding made before the watch opens is still seen. A reading
        of the pod every poll_interval seconds catches the verdicts no
        binding event carries (unschedulable, deleted).
        """
        done = _verdict(stored)
        if done is not None:
            return done
        deadline = None if timeout is None else time.monotonic() + timeout
        bound = Stop()
        watcher = _BoundWatcher(self, stored, revision, bound)
        watcher.start()
        try:
            while True:
                left = _left(deadline)
                if left is not None and left <= 0:
                    raise TimeoutError("no decision on pod %s/%s in time; it stays queued" % (stored.namespace, stored.name))
                wait = poll_interval if left is None else min(poll_interval, left)
                if bound.sleep(wait):
                    bound = Stop()  # the watcher is done: later waits are plain polls
                if watcher.error is not None:
                    raise watcher.error
                p = self.get_pod(stored.namespace, stored.name, _left(deadline))
                if p.uid != stored.uid:
                    raise RuntimeError("pod %s/%s was deleted and submitted again (uid %s, waited for %s)"
                                       % (p.namespace, p.name, p.uid, stored.uid))
                done = _verdict(p)
                if done is not None:
                    return done
        finally:
            watcher.stop()


def _left(deadline):
    return None if deadline is None else deadline - time.monotonic()


def _verdict(pod):
    """The pod if it is bound or later; raises UnschedulableError; None
    while it waits."""
    if pod.status.phase in _BOUND_OR_LATER:
        return pod
    if pod.status.phase == types.POD_PHASE_UNSCHEDULABLE:
        raise UnschedulableError(pod)
    return None


class _BoundWatcher(threading.Thread):
    """Watches from a revision for one pod's BOUND event and signals it."""

    def __init__(self, client, stored, revision, bound):
        super().__init__(daemon=True, name="berth-wait-%s/%s" % (stored.namespace, stored.name))
        self._client = client
        self._stored = stored
        self._from = revision
        self._bound = bound
        self._lock = threading.Lock()
        self._watch = None
        self._stopped = False
        self.error = None

    def stop(self):
        with self._lock:
            self._stopped = True
            if self._watch is not None:
                self._watch.cancel()
        self.join()

    def run(self):
        s = self._stored
        try:
            while True:
                with self._lock:
                    if self._stopped:
                        return
                    self._watch = self._client.watch_bindings(self._from)
                try:
                    for ev in self._watch:
                        if (ev.type == sched_pb.BINDING_EVENT_TYPE_BOUND and ev.namespace == s.namespace
                                and ev.name == s.name and ev.uid == s.uid):
                            return
                    return  # cancelled
                except CompactedError as ce:
                    # The submit's revision is gone (a pod stored long ago):
                    # the oldest revision left is no later than the polls'
                    # next reading, so a binding after it is still seen.
                    self._from = ce.oldest_revision
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED:
                self.error = err
        except Exception as err:  # handed to the waiting thread, not lost
            self.error = err
        finally:
            self._bound.set()
