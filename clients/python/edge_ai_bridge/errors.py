"""The client's errors: one type for a call that failed, whatever failed it, so device code
branches on ``code`` alone; the contract's codes as the bridge sent them, and the client's own."""
from __future__ import annotations

from typing import Any, Mapping, Optional

#: Codes the client decides itself: no reply by the deadline, ``close()``, a full offline buffer.
CLIENT_CODES = frozenset({"timeout", "closed", "offline"})

#: Codes worth a retry with the same id: the request was refused for now, not for what it is.
RETRYABLE_CODES = frozenset({"queue_full", "rate_limited", "unavailable"})


class BridgeRequestError(Exception):
    """A call that ended without an ok reply.

    ``code`` is a contract error code (``invalid_request``, ``queue_full``…) or one of the
    client's own (``timeout``, ``closed``, ``offline``); ``str(err)`` is the bridge's message
    or the client's.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        request_id: str,
        attempts: int,
        retry_after_ms: Optional[float] = None,
        reply: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id
        self.attempts = attempts
        #: The bridge's ``retry_after_ms``, when it gave one.
        self.retry_after_ms = retry_after_ms
        #: The error reply as received, when the bridge sent one.
        self.reply = reply

    def __repr__(self) -> str:
        return f"BridgeRequestError({self.code!r}, {str(self)!r}, request_id={self.request_id!r})"

    @classmethod
    def from_reply(cls, reply: Mapping[str, Any], request_id: str, attempts: int) -> BridgeRequestError:
        """The error an error reply stands for. The reply is untrusted: a malformed ``error``
        still fails the call (as ``internal``) rather than the client."""
        error = reply.get("error")
        error = error if isinstance(error, dict) else {}
        code = error.get("code")
        message = error.get("message")
        retry = error.get("retry_after_ms")
        valid_retry = isinstance(retry, (int, float)) and not isinstance(retry, bool) and retry >= 0
        return cls(
            code if isinstance(code, str) and code else "internal",
            message if isinstance(message, str) else "the bridge sent an error reply without a message",
            request_id=request_id,
            attempts=attempts,
            retry_after_ms=float(retry) if valid_retry else None,
            reply=reply,
        )


class BridgeConnectError(Exception):
    """``connect`` failed: the broker refused the login, or no connection came up in time."""

    def __init__(self, message: str, reason_code: Optional[int] = None) -> None:
        super().__init__(message)
        #: The CONNACK return code (3.1.1) or reason code (5), when the broker refused.
        self.reason_code = reason_code
