"""The client's core, shared by the synchronous and the asyncio API: one connection, any number
of calls in flight, each answered once and retried with its own id within its deadline.

Three threads meet here: the caller's, paho's network thread and the timer thread. Every change
of state happens under one lock; what it leads to (a publish, a result for a caller, events for
a stream) is collected as effects and run after the lock is released, so no caller code and no
paho call ever runs under it."""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from functools import partial
from typing import Any, Callable, Deque, Dict, List, Optional, Set

from .backoff import retry_wait
from .call import BACKOFF, DONE, READY, SENT, WAITING, Call, Sink, client_error, settle
from .errors import RETRYABLE_CODES, BridgeRequestError
from .inbound import Chunk, parse_chunk, parse_reply
from .mqtt_link import MqttLink
from .options import Settings, Topics
from .payloads import Prepared
from .scheduler import Scheduler

log = logging.getLogger("edge_ai_bridge")
Effects = List[Callable[[], None]]


class ClientCore:
    """Calls, in-flight slots, the offline buffer and the retry rules of docs/clients.md."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topics = Topics(settings)
        self._lock = threading.Lock()
        self._calls: Dict[str, Call] = {}  # every pending call, in call order
        self._waiting: Deque[Call] = deque()  # calls without an in-flight slot yet
        self._in_flight = 0
        self._unsent = 0  # calls never published yet: what the offline buffer bounds
        self._online = False
        self._stream_ready = False
        self._closed = False
        self._mids: Dict[int, Call] = {}  # PUBLISH mid -> its call, until its PUBACK
        # PUBACKs that beat the record of their mid (paho may read one before publish() returns);
        # each is taken by that record right after, so the set stays all but empty.
        self._early_acks: Set[int] = set()
        self._timers = Scheduler(f"edge_ai_bridge {settings.client_id} timers")
        self.link = MqttLink(settings, self.topics, self)

    def open(self) -> None:
        """Connects; on failure nothing of the client is left running."""
        try:
            self.link.open()
        except BaseException:
            self._timers.stop()
            raise

    @property
    def online(self) -> bool:
        """The connection is up and its reply subscription granted."""
        return self._online

    def submit(self, prepared: Prepared, timeout: Optional[float], sink: Optional[Sink] = None) -> "Future[dict]":
        """Starts a call; its future ends with the ok reply or a BridgeRequestError."""
        timeout = self.settings.timeout if timeout is None else timeout
        if not timeout > 0:
            raise ValueError("timeout must be a positive number")
        call = Call(prepared, time.monotonic() + timeout, timeout, sink)
        if sink is not None:
            self.link.want_stream()
        self._apply(self._admit, call)
        call.future.add_done_callback(lambda future: self._apply(self._abandon, call) if future.cancelled() else None)
        return call.future

    def close(self) -> None:
        """Fails every pending call with ``closed`` and ends the connection."""
        self._apply(self._close_calls)
        self._timers.stop()
        self.link.close()

    # Under the lock: each of these takes the effects list first and only changes state.

    def _apply(self, fn: Callable[..., None], *args: Any) -> None:
        effects: Effects = []
        with self._lock:
            fn(effects, *args)
        for effect in effects:
            effect()

    def _admit(self, effects: Effects, call: Call) -> None:
        if call.id in self._calls:
            raise ValueError(f"a call with id {call.id!r} is already pending")
        if self._closed:
            effects.append(partial(settle, call.future, client_error(call, "closed", "the client was closed")))
            return
        if not self._online and self._unsent >= self.settings.offline_buffer:
            message = f"the connection is down and {self._unsent} requests already wait for it"
            effects.append(partial(settle, call.future, client_error(call, "offline", message)))
            return
        self._calls[call.id] = call
        self._unsent += 1
        call.deadline_timer = self._at(call.deadline, call, self._on_deadline)
        self._waiting.append(call)
        self._fill_slots(effects)

    def _fill_slots(self, effects: Effects) -> None:
        while self._waiting and self._in_flight < self.settings.max_in_flight and not self._closed:
            call = self._waiting.popleft()
            self._in_flight += 1
            self._try_send(effects, call)

    def _try_send(self, effects: Effects, call: Call) -> None:
        """A new attempt now if the connection allows, else as soon as it does."""
        if self._online and (call.sink is None or self._stream_ready):
            self._send(effects, call, counted=True)
        else:
            call.state = READY

    def _send(self, effects: Effects, call: Call, counted: bool) -> None:
        """Publishes the call. A publish again after a reconnect is the same attempt, not a new one."""
        if counted:
            if call.attempts == 0:
                self._unsent -= 1
            call.attempts += 1
        call.state, call.acked = SENT, False
        if call.timer is not None:
            call.timer.cancel()
        call.timer = self._at(time.monotonic() + self.settings.attempt_timeout, call, self._on_attempt_timeout)
        effects.append(partial(self._publish, call))

    def _at(self, when: float, call: Call, handler: Callable[[Effects, Call], None]) -> Any:
        return self._timers.call_at(when, partial(self._apply, handler, call))

    def _on_attempt_timeout(self, effects: Effects, call: Call) -> None:
        # After the last attempt the call still waits for its reply, until its deadline.
        if call.state == SENT and call.attempts < self.settings.max_attempts:
            self._try_send(effects, call)

    def _on_deadline(self, effects: Effects, call: Call) -> None:
        message = f"no reply within {call.timeout:g} s ({call.attempts} attempts)"
        self._finish(effects, call, client_error(call, "timeout", message))

    def _after_wait(self, effects: Effects, call: Call) -> None:
        if call.state == BACKOFF:
            self._try_send(effects, call)

    def _answer(self, effects: Effects, key: str, reply: Dict[str, Any]) -> None:
        call = self._calls.get(key)
        if call is None or reply["id"] != call.id:
            log.debug("dropped a reply for %r: no pending call", key)
            return
        if reply["ok"]:
            self._finish(effects, call, reply)
            return
        error = BridgeRequestError.from_reply(reply, call.id, call.attempts)
        if error.code in RETRYABLE_CODES:
            self._retry_later(effects, call, error)
        else:
            self._finish(effects, call, error)

    def _retry_later(self, effects: Effects, call: Call, error: BridgeRequestError) -> None:
        """Waits ``retry_after_ms`` or a backoff; a wait past the deadline fails with the refusal."""
        if call.state == BACKOFF:
            return  # a second refusal of the same id while already waiting
        wait = retry_wait(error.retry_after_ms, call.attempts)
        if call.attempts >= self.settings.max_attempts or time.monotonic() + wait >= call.deadline:
            self._finish(effects, call, error)
            return
        call.state = BACKOFF
        if call.timer is not None:
            call.timer.cancel()
        call.timer = self._at(time.monotonic() + wait, call, self._after_wait)

    def _finish(self, effects: Effects, call: Call, outcome: Optional[Any] = None) -> None:
        """Ends the call: frees its slot, forgets it, and (outside the lock) tells its caller."""
        if call.state == DONE:
            return
        if call.state == WAITING:
            self._waiting.remove(call)
        else:
            self._in_flight -= 1
        if call.attempts == 0:
            self._unsent -= 1
        call.state = DONE
        call.cancel_timers()
        del self._calls[call.id]
        if call.sink is not None and call.assembler is not None:
            mend = call.assembler.finish(outcome.get("content")) if isinstance(outcome, dict) else []
            effects.append(partial(call.sink.put, mend))
            effects.append(call.sink.end)
        if outcome is not None:
            effects.append(partial(settle, call.future, outcome))
        self._fill_slots(effects)

    def _abandon(self, effects: Effects, call: Call) -> None:
        """The caller cancelled: free the slot; a reply that still comes is dropped quietly."""
        self._finish(effects, call)

    def _close_calls(self, effects: Effects) -> None:
        self._closed = True
        for call in list(self._calls.values()):
            self._finish(effects, call, client_error(call, "closed", "the client was closed"))

    def _up(self, effects: Effects, with_stream: bool) -> None:
        """Connected (again): what waited goes out, and what the broker had accepted goes out
        again, since its reply may have been published while the client was away."""
        self._online = True
        self._stream_ready = with_stream
        pending = [call for call in self._calls.values() if call.state == READY or (call.state == SENT and call.acked)]
        for call in pending:
            if call.state == READY:
                self._try_send(effects, call)
            else:
                self._send(effects, call, counted=False)
        log.info("connected to %s:%s, %d requests sent", self.settings.host, self.settings.port, len(pending))

    def _down(self, effects: Effects) -> None:
        self._online = self._stream_ready = False

    def _stream_up(self, effects: Effects) -> None:
        self._stream_ready = True
        for call in list(self._calls.values()):
            if call.state == READY and call.sink is not None:
                self._try_send(effects, call)

    def _acked(self, effects: Effects, mid: int) -> None:
        call = self._mids.pop(mid, None)
        if call is None:
            self._early_acks.add(mid)
        elif call.state == SENT:
            call.acked = True

    def _record_mid(self, effects: Effects, call: Call, mid: int) -> None:
        if mid in self._early_acks:
            self._early_acks.discard(mid)
            call.acked = call.state == SENT
        else:
            self._mids[mid] = call

    def _chunk(self, effects: Effects, chunk: Chunk) -> None:
        call = self._calls.get(chunk.request_id)
        if call is None or call.sink is None or call.assembler is None:
            return
        events = call.assembler.chunk(chunk.seq, chunk.delta, chunk.reset)
        if events:
            effects.append(partial(call.sink.put, events))

    # Outside the lock.

    def _publish(self, call: Call) -> None:
        try:
            mid = self.link.publish(call.build(call.deadline - time.monotonic()))
        except Exception as err:  # paho refused it (too large a payload…): the caller's to see
            self._apply(self._finish, call, err)
            return
        self._apply(self._record_mid, call, mid)

    # paho's network thread (MqttLink's Handlers).

    def on_up(self, with_stream: bool) -> None:
        self._apply(self._up, with_stream)

    def on_down(self) -> None:
        self._apply(self._down)

    def on_stream_ready(self) -> None:
        self._apply(self._stream_up)

    def on_puback(self, mid: int) -> None:
        self._apply(self._acked, mid)

    def on_reply(self, payload: bytes, correlation: Optional[bytes]) -> None:
        reply = parse_reply(payload)
        if reply is not None:
            key = correlation.decode("utf-8", "replace") if correlation is not None else reply["id"]
            self._apply(self._answer, key, reply)

    def on_chunk(self, payload: bytes) -> None:
        chunk = parse_chunk(payload)
        if chunk is not None:
            self._apply(self._chunk, chunk)
