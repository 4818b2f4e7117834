"""What the synchronous and the asyncio client share: the core, and how each kind of call
becomes a request for it. The two differ only in how a caller waits."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Iterable, List, Mapping, Optional

from .call import Sink
from .core import ClientCore
from .options import check_priority, settings_of
from .payloads import Prepared, image_request, json_request


def open_core(url: str, device_id: str, options: Mapping[str, Any]) -> ClientCore:
    """A connected core for ``connect``'s arguments (blocks up to ``connect_timeout``)."""
    core = ClientCore(settings_of(url, device_id, **options))
    core.open()
    return core


class ClientBase:
    """A connected client; see BridgeClient and AsyncBridgeClient."""

    def __init__(self, core: ClientCore) -> None:
        self._core = core

    @property
    def connected(self) -> bool:
        """The connection is up (requests made now are published at once)."""
        return self._core.online

    @property
    def protocol(self) -> int:
        """5 (MQTT 5) or 4 (MQTT 3.1.1): 4 when asked for, or when the broker refused 5."""
        return self._core.link.protocol

    @property
    def client_id(self) -> str:
        return self._core.settings.client_id

    @property
    def reply_topic(self) -> str:
        """Where this connection's replies arrive: its Response Topic, or the device's result topic."""
        return self._core.link.reply_topic

    def _prepare(self, request: Mapping[str, Any], priority: Optional[str]) -> Prepared:
        priority = check_priority(priority or self._core.settings.priority)
        return json_request(self._core.topics, priority, request)

    def _prepare_all(self, requests: Iterable[Mapping[str, Any]], priority: Optional[str]) -> List[Prepared]:
        """A batch's requests, all checked before the first is sent: a malformed one is a bug."""
        return [self._prepare(request, priority) for request in requests]

    def _json(
        self, request: Mapping[str, Any], priority: Optional[str], timeout: Optional[float], sink: Optional[Sink] = None
    ) -> "Future[dict]":
        return self._core.submit(self._prepare(request, priority), timeout, sink)

    def _image(
        self,
        data: bytes,
        template: str,
        vars: Optional[Mapping[str, object]],
        priority: Optional[str],
        timeout: Optional[float],
        request_id: Optional[str],
    ) -> "Future[dict]":
        priority = check_priority(priority or self._core.settings.priority)
        mqtt5 = self._core.link.protocol == 5
        prepared = image_request(self._core.topics, priority, data, template, vars, request_id, mqtt5)
        return self._core.submit(prepared, timeout)


def check_concurrency(concurrency: int) -> int:
    if not (isinstance(concurrency, int) and concurrency >= 1):
        raise ValueError("concurrency must be an integer >= 1")
    return concurrency
