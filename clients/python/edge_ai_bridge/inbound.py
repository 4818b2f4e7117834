"""What arrives from the broker is untrusted input: a reply or a stream chunk is read only
when it has the contract's shape, and anything else is ignored, never an error of the client."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Optional


@dataclass(frozen=True)
class Chunk:
    """One chunk of a streamed request's text on ``devices/{id}/stream``."""

    request_id: str
    seq: int
    delta: Optional[str]
    reset: bool


def parse_object(payload: bytes) -> Optional[Dict[str, Any]]:
    """A JSON object, else None."""
    try:
        value = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def parse_reply(payload: bytes) -> Optional[Dict[str, Any]]:
    """A reply: a JSON object with a string ``id`` and a boolean ``ok``, else None."""
    reply = parse_object(payload)
    if reply is None or not isinstance(reply.get("id"), str) or not isinstance(reply.get("ok"), bool):
        return None
    return reply


def parse_chunk(payload: bytes) -> Optional[Chunk]:
    """A chunk: a string ``id``, a whole ``seq`` from 0, and a string ``delta`` or ``reset``."""
    chunk = parse_object(payload)
    if chunk is None or not isinstance(chunk.get("id"), str):
        return None
    seq, delta = chunk.get("seq"), chunk.get("delta")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return None
    return Chunk(chunk["id"], seq, delta if isinstance(delta, str) else None, chunk.get("reset") is True)
