"""What each kind of call publishes: a JSON request on the infer topic, or raw image bytes on
the image topic. A call's id is a fresh UUID unless the caller gives one, and it stays the same
for every attempt, so the bridge answers a repeat from its record (guarantee 2)."""
from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional, Tuple

from .options import TEMPLATE_NAME, Topics, check_request_id


@dataclass(frozen=True)
class Outgoing:
    """One attempt's publish; built anew for each attempt, so ``ttl_ms`` is the time then left."""

    topic: str
    payload: bytes
    #: The request id, sent as the MQTT 5 Correlation Data.
    correlation: bytes
    user_properties: List[Tuple[str, str]] = field(default_factory=list)
    #: MQTT 5 Message Expiry Interval, seconds.
    expiry_seconds: Optional[int] = None


@dataclass(frozen=True)
class Prepared:
    """A request ready to be sent: its id, and how to build an attempt from the time left."""

    request_id: str
    build: Callable[[float], Outgoing]


def _request_id(given: object) -> str:
    return str(uuid.uuid4()) if given is None else check_request_id(given)


def json_request(topics: Topics, priority: str, request: Mapping[str, Any]) -> Prepared:
    """A JSON request. Unless it sets its own ``ttl_ms``, each attempt carries the time left of
    the call's deadline, so the bridge does not pay the upstream for an answer nobody waits for."""
    if not isinstance(request, Mapping):
        raise TypeError("a request must be a dict")
    request_id = _request_id(request.get("id"))
    topic = topics.infer(priority)
    body = {**request, "id": request_id}
    own_ttl = "ttl_ms" in request

    def build(time_left: float) -> Outgoing:
        sent = body if own_ttl else {**body, "ttl_ms": max(1, int(time_left * 1000))}
        payload = json.dumps(sent, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return Outgoing(topic, payload, request_id.encode("utf-8"))

    return Prepared(request_id, build)


def image_request(
    topics: Topics,
    priority: str,
    data: bytes,
    template: str,
    vars: Optional[Mapping[str, object]],
    request_id: Optional[str],
    mqtt5: bool,
) -> Prepared:
    """A raw camera image, everything named in its topic. Its vars travel as MQTT 5 user
    properties ``var.{name}`` (so they need MQTT 5), and its deadline as the Message Expiry
    Interval: an image carries no JSON to hold ``ttl_ms``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("an image must be bytes")
    if not isinstance(template, str) or not TEMPLATE_NAME.fullmatch(template):
        raise ValueError("template must be 1 to 64 characters of A-Za-z0-9_.-")
    pairs = [(f"var.{name}", str(value)) for name, value in (vars or {}).items()]
    if pairs and not mqtt5:
        raise ValueError("an image with vars needs MQTT 5 (they go as user properties)")
    rid = _request_id(request_id)
    topic = topics.image(priority, template, rid)
    payload = bytes(data)

    def build(time_left: float) -> Outgoing:
        expiry = max(1, math.ceil(time_left)) if mqtt5 else None
        return Outgoing(topic, payload, rid.encode("utf-8"), pairs, expiry)

    return Prepared(rid, build)


def template_request(name: str, vars: Optional[Mapping[str, object]], fields: Mapping[str, Any]) -> dict:
    """A template request: the bridge renders the prompt; ``fields`` adds ``model``, ``id``…"""
    return {**fields, "template": name, "vars": dict(vars or {})}


def embed_request(input: object, fields: Mapping[str, Any]) -> dict:
    """An embeddings request for a string or a list of strings; ``fields`` adds ``model``…"""
    return {**fields, "input": input}


def stream_request(request: Mapping[str, Any]) -> dict:
    """A chat request asking for its text on the device's stream topic as it is written."""
    if not isinstance(request, Mapping):
        raise TypeError("a request must be a dict")
    return {**request, "stream": True}
