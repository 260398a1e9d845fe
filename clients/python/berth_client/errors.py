"""Reading the structured details a Berth server attaches to its errors."""

import grpc

from berth_client import rpc_status_pb2

# The trailer gRPC carries a serialized google.rpc.Status in.
_DETAILS_KEY = "grpc-status-details-bin"
_RETRY_INFO = "google.rpc.RetryInfo"
_ERROR_INFO = "google.rpc.ErrorInfo"

#: ErrorInfo reason of a watch cut off because its reader fell behind.
FELL_BEHIND_REASON = "WATCH_FELL_BEHIND"
#: ErrorInfo metadata key: every event up to this revision was sent.
RESUME_REVISION_KEY = "resume_revision"
#: ErrorInfo metadata key: the oldest revision a watch can resume from.
COMPACT_REVISION_KEY = "compact_revision"


class BerthError(Exception):
    """Base of the errors the client raises itself."""


class CompactedError(BerthError):
    """The revision a watch asked for was compacted away.

    Rebuild state with a watch from revision 0 (every bound pod, then live
    events), or resume from ``oldest_revision`` accepting the gap.
    """

    def __init__(self, oldest_revision, cause=None):
        super().__init__(
            "watch revision compacted; oldest available revision is %d" % oldest_revision)
        self.oldest_revision = oldest_revision
        self.cause = cause


class UnschedulableError(BerthError):
    """The scheduler found no node for the pod.

    The pod stays queued and is tried again on cluster events;
    ``pod.status.diagnosis`` says why no node fitted.
    """

    def __init__(self, pod):
        msg = pod.status.message or "no node fits"
        super().__init__("pod %s/%s is unschedulable: %s" % (pod.namespace, pod.name, msg))
        self.pod = pod


def _status(err):
    """The google.rpc.Status in err's trailer, or None."""
    trailer = getattr(err, "trailing_metadata", None)
    if trailer is None:
        return None
    try:
        md = trailer() or ()
    except Exception:  # an error raised before any response has none
        return None
    for key, value in md:
        if key == _DETAILS_KEY:
            st = rpc_status_pb2.Status()
            try:
                st.ParseFromString(value)
            except Exception:
                return None
            return st
    return None


def _details(err, type_name, message_type):
    st = _status(err)
    if st is None:
        return []
    found = []
    for any_msg in st.details:
        if any_msg.type_url.rsplit("/", 1)[-1] == type_name:
            m = message_type()
            m.ParseFromString(any_msg.value)
            found.append(m)
    return found


def retry_delay(err):
    """Seconds a shedding server asked to wait in its RetryInfo, or 0."""
    for info in _details(err, _RETRY_INFO, rpc_status_pb2.RetryInfo):
        if info.HasField("retry_delay"):
            return max(info.retry_delay.ToTimedelta().total_seconds(), 0.0)
    return 0.0


def error_infos(err):
    """Every ErrorInfo attached to err."""
    return _details(err, _ERROR_INFO, rpc_status_pb2.ErrorInfo)


def fell_behind_revision(err):
    """The resume revision of a WATCH_FELL_BEHIND cut-off, or None."""
    if not isinstance(err, grpc.RpcError) or err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    for info in error_infos(err):
        if info.reason == FELL_BEHIND_REASON:
            try:
                return int(info.metadata[RESUME_REVISION_KEY])
            except (KeyError, ValueError):
                continue
    return None


def as_compacted(err):
    """A CompactedError for a compaction failure, or None."""
    if not isinstance(err, grpc.RpcError) or err.code() != grpc.StatusCode.FAILED_PRECONDITION:
        return None
    for info in error_infos(err):
        if COMPACT_REVISION_KEY in info.metadata:
            try:
                return CompactedError(int(info.metadata[COMPACT_REVISION_KEY]), err)
            except ValueError:
                continue
    return None
