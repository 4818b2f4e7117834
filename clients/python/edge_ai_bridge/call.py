"""One call: its request id, where it stands, its timers and the future its caller waits on.
The core decides what happens to it, under its lock; a call only holds the state."""
from __future__ import annotations

from concurrent.futures import Future, InvalidStateError
from typing import Optional, Protocol, Union

from .errors import BridgeRequestError
from .payloads import Prepared
from .scheduler import Timer
from .streams import Event, StreamAssembler

# Where a call stands. WAITING: for an in-flight slot. READY: holds a slot, to be published as
# soon as the connection allows. SENT: published, its reply awaited. BACKOFF: refused for now,
# waiting to try again. DONE: settled, forgotten by the core.
WAITING, READY, SENT, BACKOFF, DONE = "waiting", "ready", "sent", "backoff", "done"


class Sink(Protocol):
    """Where a stream call's events go: a queue its reader drains."""

    def put(self, events: list[Event]) -> None: ...

    def end(self) -> None: ...


class Call:
    """A call's state; one per request id while it is pending."""

    def __init__(self, prepared: Prepared, deadline: float, timeout: float, sink: Optional[Sink]) -> None:
        self.id = prepared.request_id
        self.build = prepared.build
        self.deadline = deadline
        self.timeout = timeout
        self.future: "Future[dict]" = Future()
        self.sink = sink
        self.assembler = StreamAssembler() if sink is not None else None
        self.state = WAITING
        self.attempts = 0
        #: The broker acknowledged a publish of it (PUBACK): after a reconnect it is published
        #: again, since its reply may have gone out while the client was away.
        self.acked = False
        #: The attempt timeout or the retry wait, whichever runs now.
        self.timer: Optional[Timer] = None
        self.deadline_timer: Optional[Timer] = None

    def cancel_timers(self) -> None:
        for timer in (self.timer, self.deadline_timer):
            if timer is not None:
                timer.cancel()


def settle(future: "Future[dict]", outcome: Union[dict, BaseException]) -> None:
    """Sets the caller's result once; a future the caller cancelled meanwhile stays cancelled."""
    if future.done():
        return
    try:
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
    except InvalidStateError:
        pass  # cancelled between the check and the set: the caller no longer waits


def client_error(call: Call, code: str, message: str) -> BridgeRequestError:
    """One of the client's own errors (timeout, closed, offline) for this call."""
    return BridgeRequestError(code, message, request_id=call.id, attempts=call.attempts)
