"""Python client of edge-ai-bridge: device code asks LLMs over MQTT through the bridge, with
the plumbing every device would otherwise write (request ids, reply matching, deadlines,
retries with the same id, ``retry_after_ms``, streams). See docs/clients.md."""
import logging

from .aio import AsyncBridgeClient
from .client import BridgeClient
from .errors import BridgeConnectError, BridgeRequestError
from .streams import AsyncBridgeStream, BridgeStream

# A library logs; the application decides where to (the logging docs' advice for libraries).
logging.getLogger("edge_ai_bridge").addHandler(logging.NullHandler())

__version__ = "0.8.0"
__all__ = [
    "AsyncBridgeClient",
    "AsyncBridgeStream",
    "BridgeClient",
    "BridgeConnectError",
    "BridgeRequestError",
    "BridgeStream",
]
