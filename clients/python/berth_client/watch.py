"""A binding watch that resumes across disconnects without gap or repeat."""

import threading

import grpc

from berth.v1 import scheduler_service_pb2
from berth_client.errors import as_compacted, fell_behind_revision
from berth_client.retry import Stop

# Codes a broken stream is reconnected after. DEADLINE_EXCEEDED is a
# proxy's or the server's: the watch itself sets none.
_RESUMABLE = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED, grpc.StatusCode.DEADLINE_EXCEEDED,
})


def _key(ev):
    # etcd writes a key at most once per revision, so these tell apart the
    # events of one revision; the node tells NODE_LOST events apart.
    return (ev.type, ev.namespace, ev.name, ev.uid, ev.node_name)


class _Cursor:
    """What the caller has seen, to resume without gap or repeat."""

    def __init__(self, from_revision):
        self.frm = from_revision
        self.last = 0  # revision of the last delivered event
        self.at_last = set()  # events already delivered at revision last
        # A listing (from 0) cut short is redone from 0, skipping these.
        self.listed = set() if from_revision == 0 else None
        self.capped = 0  # a server's resume revision below our own

    def progress(self, rev):
        self.listed, self.capped = None, 0
        self.frm, self.last = rev, 0
        self.at_last.clear()

    def cap(self, rev):
        if rev > 0:
            self.capped = rev

    def resume_from(self):
        if self.listed is not None:
            return 0
        if self.last == 0:
            own = self.frm
        elif self.last > 1:
            own = self.last - 1  # the disconnect may have split revision last
        else:
            own = self.last
        return min(own, self.capped) if self.capped > 0 else own

    def seen(self, ev):
        if self.listed is not None:
            return _key(ev) in self.listed
        if self.last == 0:
            return False
        if ev.revision < self.last:
            return True
        return ev.revision == self.last and _key(ev) in self.at_last

    def delivered(self, ev):
        self.capped = 0
        if self.listed is not None:
            self.listed.add(_key(ev))
            return
        if ev.revision != self.last:
            self.at_last.clear()
            self.last = ev.revision
        self.at_last.add(_key(ev))


class Watch:
    """Iterates over binding events after a revision (0: every pod bound
    now, then live events), in revision order, each exactly once.

    A broken stream is reconnected with backoff and resumed after the last
    event yielded; a WATCH_FELL_BEHIND cut-off resumes from the server's
    resume revision at once when events had arrived since the last cut.
    Raises CompactedError when the revision to resume from is gone, and
    any other server error as grpc.RpcError. ``cancel()``, from any
    thread, ends the iteration.
    """

    def __init__(self, stub, from_revision, backoff, metadata=None):
        self._stub = stub
        self._cursor = _Cursor(from_revision)
        self._backoff = backoff
        self._metadata = metadata
        self._stop = Stop()
        self._lock = threading.Lock()
        self._call = None

    def cancel(self):
        self._stop.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cancel()

    def __iter__(self):
        failures = 0  # reconnects without an event in between
        while not self._stop.is_set():
            progressed, err = yield from self._stream()
            if self._stop.is_set():
                return
            compacted = as_compacted(err)
            if compacted is not None:
                raise compacted
            if err.code() not in _RESUMABLE and err.code() != grpc.StatusCode.OK:
                raise err
            if progressed:
                failures = 0
            rev = fell_behind_revision(err)
            if rev is not None:
                self._cursor.cap(rev)
                if progressed:
                    continue  # the reader was slow, not the server
            failures += 1
            if self._stop.sleep(self._backoff.delay(failures)):
                return

    def _stream(self):
        """Runs one stream until it ends; returns (progressed, error)."""
        cur = self._cursor
        req = scheduler_service_pb2.WatchBindingsRequest(from_revision=cur.resume_from())
        with self._lock:
            if self._stop.is_set():
                return False, None
            call = self._stub.WatchBindings(req, metadata=self._metadata)
            self._call = call
        progressed = False
        try:
            for resp in call:
                if not resp.HasField("event"):
                    if resp.progress_revision > 0:
                        cur.progress(resp.progress_revision)
                    continue
                ev = resp.event
                if cur.seen(ev):
                    continue
                yield ev
                cur.delivered(ev)
                progressed = True
            # The server ended the stream (a graceful shutdown): resume.
            return progressed, _Ended()
        except grpc.RpcError as err:
            return progressed, err
        finally:
            with self._lock:
                self._call = None
            call.cancel()


class _Ended(grpc.RpcError):
    """A stream the server closed with OK, which the watch resumes after."""

    def code(self):
        return grpc.StatusCode.OK

    def trailing_metadata(self):
        return ()
