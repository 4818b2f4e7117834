"""The asyncio client: the same core as the synchronous one, its futures bridged into the
event loop with ``asyncio.wrap_future`` (results arrive on paho's network thread). Cancelling
a task that awaits a call gives the call up: its slot frees, and a late reply is dropped."""
from __future__ import annotations

import asyncio
from typing import Any, List, Mapping, Optional, Sequence, Union

from .base import ClientBase, check_concurrency, open_core
from .client import BatchResult
from .errors import BridgeRequestError
from .payloads import Prepared, embed_request, stream_request, template_request
from .streams import AsyncBridgeStream, LoopSink


class AsyncBridgeClient(ClientBase):
    """A device's connection to the bridge for asyncio code; the options of BridgeClient.

    ``async with await AsyncBridgeClient.connect(url, device_id) as bridge: ...``"""

    @classmethod
    async def connect(cls, url: str, device_id: str, **options: Any) -> AsyncBridgeClient:
        """Connects (in a worker thread, since paho connects by blocking), or raises BridgeConnectError."""
        loop = asyncio.get_running_loop()
        return cls(await loop.run_in_executor(None, open_core, url, device_id, options))

    async def chat(self, request: Mapping[str, Any], *, priority: Optional[str] = None, timeout: Optional[float] = None) -> dict:
        """A chat request (``messages``…); any request of the contract goes this way too."""
        return await asyncio.wrap_future(self._json(request, priority, timeout))

    async def template(
        self,
        name: str,
        vars: Optional[Mapping[str, object]] = None,
        *,
        priority: Optional[str] = None,
        timeout: Optional[float] = None,
        **fields: Any,
    ) -> dict:
        """A template request; ``fields`` adds request fields (``id``, ``model``, ``cache``…)."""
        return await asyncio.wrap_future(self._json(template_request(name, vars, fields), priority, timeout))

    async def embed(
        self, input: Union[str, Sequence[str]], *, priority: Optional[str] = None, timeout: Optional[float] = None, **fields: Any
    ) -> dict:
        """An embeddings request; the reply carries ``embedding`` or ``embeddings``."""
        return await asyncio.wrap_future(self._json(embed_request(input, fields), priority, timeout))

    async def image(
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
        return await asyncio.wrap_future(self._image(data, template, vars, priority, timeout, id))

    def stream(self, request: Mapping[str, Any], *, priority: Optional[str] = None, timeout: Optional[float] = None) -> AsyncBridgeStream:
        """A chat request streamed: ``async for`` its events, then read ``.reply``."""
        loop = asyncio.get_running_loop()
        sink = LoopSink(loop)
        future = asyncio.wrap_future(self._json(stream_request(request), priority, timeout, sink), loop=loop)
        # Read by the iteration; this only keeps asyncio from warning about a stream left unread.
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        return AsyncBridgeStream(sink, future)

    async def batch(
        self,
        requests: Sequence[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        priority: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> List[BatchResult]:
        """Several requests, at most ``concurrency`` at once; results in request order, each the
        reply or its BridgeRequestError."""
        slots = asyncio.Semaphore(check_concurrency(concurrency))

        async def one(prepared: Prepared) -> BatchResult:
            async with slots:
                try:
                    return await asyncio.wrap_future(self._core.submit(prepared, timeout))
                except BridgeRequestError as error:
                    return error

        return list(await asyncio.gather(*(one(p) for p in self._prepare_all(requests, priority))))

    async def close(self) -> None:
        """Fails every unanswered call with ``closed`` and ends the connection."""
        await asyncio.get_running_loop().run_in_executor(None, self._core.close)

    async def __aenter__(self) -> AsyncBridgeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
