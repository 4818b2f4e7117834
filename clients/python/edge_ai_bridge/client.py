"""The synchronous client: each call blocks its thread until the reply, while paho's network
thread and one timer thread do the rest, so any number of threads may share one client."""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, List, Mapping, Optional, Sequence, Union

from .base import ClientBase, check_concurrency, open_core
from .errors import BridgeRequestError
from .payloads import embed_request, stream_request, template_request
from .streams import BridgeStream, QueueSink

BatchResult = Union[dict, BridgeRequestError]


def wait(future: "Future[dict]") -> dict:
    """The call's reply; an interrupt (Ctrl-C) while waiting gives the call up."""
    try:
        return future.result()
    except BaseException:
        future.cancel()  # a no-op when the call itself failed: it is done
        raise


def outcome(future: "Future[dict]") -> BatchResult:
    """A batch's result: the reply, or the call's BridgeRequestError; anything else is raised."""
    error = future.exception()
    if error is None:
        return future.result()
    if isinstance(error, BridgeRequestError):
        return error
    raise error


class BridgeClient(ClientBase):
    """A device's connection to the bridge (docs/clients.md). Thread-safe.

    ``BridgeClient.connect(url, device_id, **options)`` takes the options of docs/clients.md:
    ``client_id``, ``username``, ``password``, ``ca``, ``cert``, ``key`` (file paths),
    ``protocol`` (5 or 4), ``keepalive``, ``connect_timeout``, ``max_in_flight``,
    ``offline_buffer``, ``timeout``, ``attempt_timeout``, ``max_attempts``, ``priority``
    (times in seconds)."""

    @classmethod
    def connect(cls, url: str, device_id: str, **options: Any) -> BridgeClient:
        """Connects, or raises BridgeConnectError (a refused login, or no connection in time)."""
        return cls(open_core(url, device_id, options))

    def chat(self, request: Mapping[str, Any], *, priority: Optional[str] = None, timeout: Optional[float] = None) -> dict:
        """A chat request (``messages``…); any request of the contract goes this way too."""
        return wait(self._json(request, priority, timeout))

    def template(
        self,
        name: str,
        vars: Optional[Mapping[str, object]] = None,
        *,
        priority: Optional[str] = None,
        timeout: Optional[float] = None,
        **fields: Any,
    ) -> dict:
        """A template request; ``fields`` adds request fields (``id``, ``model``, ``cache``…)."""
        return wait(self._json(template_request(name, vars, fields), priority, timeout))

    def embed(self, input: Union[str, Sequence[str]], *, priority: Optional[str] = None, timeout: Optional[float] = None, **fields: Any) -> dict:
        """An embeddings request; the reply carries ``embedding`` (a string) or ``embeddings`` (a list)."""
        return wait(self._json(embed_request(input, fields), priority, timeout))

    def image(
        self,
        data: bytes,
        *,
        template: str,
        vars: Optional[Mapping[str, object]] = None,
        priority: Optional[str] = None,
        timeout: Optional[float] = None,
        id: Optional[str] = None,
    ) -> dict:
        """A raw JPEG, PNG or WebP image for ``template``; ``vars`` need MQTT 5."""
        return wait(self._image(data, template, vars, priority, timeout, id))

    def stream(self, request: Mapping[str, Any], *, priority: Optional[str] = None, timeout: Optional[float] = None) -> BridgeStream:
        """A chat request streamed: iterate its events, then read ``.reply``."""
        sink = QueueSink()
        return BridgeStream(sink, self._json(stream_request(request), priority, timeout, sink))

    def batch(
        self,
        requests: Sequence[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        priority: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> List[BatchResult]:
        """Several requests, at most ``concurrency`` at once; results in request order, each the
        reply or its BridgeRequestError."""
        slots = threading.Semaphore(check_concurrency(concurrency))
        futures: List["Future[dict]"] = []
        try:
            for prepared in self._prepare_all(requests, priority):
                slots.acquire()
                future = self._core.submit(prepared, timeout)
                future.add_done_callback(lambda _: slots.release())
                futures.append(future)
            return [outcome(future) for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    def close(self) -> None:
        """Fails every unanswered call with ``closed`` and ends the connection."""
        self._core.close()

    def __enter__(self) -> BridgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
