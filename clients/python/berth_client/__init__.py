"""Python client of the Berth scheduling service.

``Client`` wraps one gRPC channel with typed calls for nodes and pods,
``submit_and_wait``, and ``watch_bindings``, a watch that resumes across
disconnects without losing or repeating events. The generated stubs and
messages are in ``berth.v1`` (``types_pb2`` holds Node, Pod, ...).
"""

from berth_client.client import DEFAULT_ADDR, MAX_SUBMIT_BATCH, Client
from berth_client.errors import (
    BerthError,
    CompactedError,
    UnschedulableError,
    fell_behind_revision,
    retry_delay,
)
from berth_client.retry import Backoff
from berth_client.watch import Watch

__all__ = [
    "DEFAULT_ADDR", "MAX_SUBMIT_BATCH", "Backoff", "BerthError", "Client", "CompactedError",
    "UnschedulableError", "Watch", "fell_behind_revision", "retry_delay",
]
