"""How long a call waits before it tries again after a refusal worth a retry. Every attempt
carries the call's one request id, so the bridge answers a repeat from its record and the
upstream is never paid twice; the wait only spares the bridge a refused fleet coming back in step."""
from __future__ import annotations

import random as _random
from typing import Callable, Optional

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
#: A bridge-given wait is stretched by up to this share, so a refused fleet does not return in step.
RETRY_AFTER_SPREAD = 0.2


def retry_wait(retry_after_ms: Optional[float], attempt: int, random: Callable[[], float] = _random.random) -> float:
    """Seconds to wait after attempt ``attempt`` (1-based) was refused: the bridge's
    ``retry_after_ms`` (up to 20 % more) when it gave one, else half to all of
    0.5 s x 2^(attempt-1), at most 30 s."""
    if retry_after_ms is not None:
        return retry_after_ms / 1000.0 * (1.0 + RETRY_AFTER_SPREAD * random())
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** min(max(0, attempt - 1), 16))
    return ceiling / 2 + ceiling / 2 * random()
