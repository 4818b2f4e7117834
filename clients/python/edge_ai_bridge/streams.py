"""A ``stream`` call as an iterator of its text as the model writes it, then its reply.

The bridge's chunks are QoS 0 by default and may be lost; the client still keeps the
contract's promise: when the iteration ends, the deltas after the last reset, joined, are
exactly the reply's ``content``. When the chunks said otherwise (one was missed, or a reset),
the last events are a reset and the whole content as one delta."""
from __future__ import annotations

import asyncio
import queue
from concurrent.futures import Future
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional

Event = Dict[str, Any]
_END = object()


def _reset() -> Event:
    return {"reset": True}


class StreamAssembler:
    """Turns a request's chunks, in arrival order, into events; pure, so it is tested alone."""

    def __init__(self) -> None:
        self._next_seq = 0
        self._text: List[str] = []
        self._shown = False

    def chunk(self, seq: int, delta: Optional[str], reset: bool) -> List[Event]:
        """The events one chunk adds: none for a duplicate, a reset, a delta."""
        events: List[Event] = []
        if seq == 0 and self._next_seq > 0:
            # seq 0 again: the request runs anew (a takeover after a crash), its text starts afresh.
            if self._text:
                events.append(_reset())
            self._text = []
        elif seq < self._next_seq:
            return events
        self._next_seq = seq + 1
        if reset:
            events.append(_reset())
            self._text = []
        elif delta:
            events.append({"delta": delta})
            self._text.append(delta)
        self._shown = self._shown or bool(events)
        return events

    def finish(self, content: object) -> List[Event]:
        """The events that make the text shown equal the reply's content (often none)."""
        content = content if isinstance(content, str) else ""
        if "".join(self._text) == content:
            return []
        mend = [{"delta": content}] if content else []
        return [_reset(), *mend] if self._shown else mend


class QueueSink:
    """Where the client's network thread hands a stream's events, for a synchronous reader."""

    def __init__(self) -> None:
        self._queue: "queue.SimpleQueue[object]" = queue.SimpleQueue()

    def put(self, events: List[Event]) -> None:
        for event in events:
            self._queue.put(event)

    def end(self) -> None:
        self._queue.put(_END)

    def get(self) -> object:
        return self._queue.get()


class LoopSink:
    """The same for an asyncio reader: the network thread is not the loop's, so each event is
    handed over with ``call_soon_threadsafe``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._events: "asyncio.Queue[object]" = asyncio.Queue()

    def put(self, events: List[Event]) -> None:
        for event in events:
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)

    def end(self) -> None:
        self._loop.call_soon_threadsafe(self._events.put_nowait, _END)

    async def get(self) -> object:
        return await self._events.get()


class BridgeStream:
    """``for event in stream``: ``{"delta": str}`` or ``{"reset": True}``; then ``stream.reply``.

    A failed request ends the iteration by raising its ``BridgeRequestError``."""

    def __init__(self, sink: QueueSink, future: "Future[dict]") -> None:
        self._sink = sink
        self._future = future
        self._ended = False

    def __iter__(self) -> Iterator[Event]:
        while not self._ended:
            event = self._sink.get()
            if event is _END:
                self._ended = True
                break
            yield event  # type: ignore[misc]
        self._future.result()  # raises the call's error

    @property
    def reply(self) -> dict:
        """The full reply, as ``chat()`` returns it; waits for it when the call is still running."""
        return self._future.result()


class AsyncBridgeStream:
    """``async for event in stream``, then ``stream.reply`` once the iteration has ended."""

    def __init__(self, sink: LoopSink, future: "asyncio.Future[dict]") -> None:
        self._sink = sink
        self._future = future
        self._ended = False

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        while not self._ended:
            event = await self._sink.get()
            if event is _END:
                self._ended = True
                break
            yield event  # type: ignore[misc]
        await self._future  # raises the call's error

    @property
    def reply(self) -> dict:
        """The full reply; an event loop cannot block, so it is there once the iteration ended."""
        if not self._future.done():
            raise RuntimeError("the stream has not ended: iterate it first (async for)")
        return self._future.result()
