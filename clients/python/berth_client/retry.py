"""Retrying unary calls the way the Go client does."""

import random
import threading
import time

import grpc

from berth_client.errors import retry_delay

#: Codes a unary call is tried again on: the server (or its storage) could
#: not take the call now, and every Berth write is safe to repeat.
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


class Backoff:
    """Exponential backoff with equal jitter: the n-th wait is drawn from
    [d/2, d] with d = base * 2**(n-1), capped at limit, so clients that
    failed together spread out and none retries at once. base 0 retries
    without waiting."""

    def __init__(self, base=0.1, limit=5.0):
        self.base = base
        self.limit = limit

    def delay(self, attempt):
        """Seconds to wait before retry number attempt (1 for the first)."""
        if self.base <= 0 or attempt <= 0:
            return 0.0
        d = self.base * 2 ** min(attempt - 1, 62)
        if self.limit > 0:
            d = min(d, self.limit)
        return random.uniform(d / 2, d)


def call_with_retry(fn, request, *, timeout, max_attempts, backoff, metadata=None, sleep=None):
    """Calls fn(request) up to max_attempts times on RETRYABLE codes.

    Each wait is the client's backoff, but never less than the RetryInfo
    delay the server asked for. It never outlives timeout (seconds, None
    for no limit): when the next wait would reach the deadline the server's
    last answer is raised at once, so the caller sees why the server
    refused rather than a bare DEADLINE_EXCEEDED.
    """
    sleep = sleep or time.sleep
    deadline = None if timeout is None else time.monotonic() + timeout
    answered = None
    attempt = 0
    while True:
        attempt += 1
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            if answered is not None:
                raise answered
            remaining = 0.0
        try:
            return fn(request, timeout=remaining, metadata=metadata)
        except grpc.RpcError as err:
            if answered is not None and err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise answered from None
            if err.code() not in RETRYABLE or attempt >= max_attempts:
                raise
            answered = err
            wait = max(backoff.delay(attempt), retry_delay(err))
            if deadline is not None and deadline - time.monotonic() <= wait:
                raise
            sleep(wait)


class Stop:
    """A flag a waiting loop sleeps on, so another thread can end the wait
    at once."""

    def __init__(self):
        self._event = threading.Event()

    def set(self):
        self._event.set()

    def is_set(self):
        return self._event.is_set()

    def sleep(self, seconds):
        """Waits seconds; True if stopped meanwhile."""
        return self._event.wait(max(seconds, 0.0))
