"""One TokenReview or SubjectAccessReview: a POST to the API server, bounded in time.

apiserver's webhook authenticator and authorizer retry a failed review with backoff
(``DefaultAuthWebhookRetryBackoff``: 500 ms, factor 1.5, jitter 0.2, 5 steps) while a
transport error or a 429/5xx answer says it may succeed; the whole review, retries included,
is bounded by its timeout (10 s). So is this one; the caller turns a :class:`ReviewError` into
a 401 (authentication) or a 500 (authorization), never into a crash.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

from koordsched.backends.kube.client import TRANSPORT_ERRORS, ApiError, KubeClient

BACKOFF_START = 0.5
BACKOFF_FACTOR = 1.5
BACKOFF_JITTER = 0.2
BACKOFF_STEPS = 5


class ReviewError(Exception):
    """The review could not be made: the API server refused it, failed, or did not answer in time."""


async def post_review(client: KubeClient, path: str, body: Mapping[str, Any], *, limit: float) -> bytes:
    """POST ``body`` to ``path`` and return the answer's bytes, within ``limit`` seconds."""
    delay = BACKOFF_START
    last: BaseException | None = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    try:
        async with asyncio.timeout_at(deadline):
            for step in range(BACKOFF_STEPS):
                try:
                    return await client.request_bytes(
                        "POST", path, body=body, request_timeout=max(0.001, deadline - loop.time())
                    )
                except ApiError as err:
                    if not err.transient:
                        raise ReviewError(str(err)) from err
                    last = err
                except TRANSPORT_ERRORS as err:
                    if isinstance(err, TimeoutError) and loop.time() >= deadline:
                        raise
                    last = err
                if step < BACKOFF_STEPS - 1:
                    await asyncio.sleep(delay * (1 + BACKOFF_JITTER * random.random()))
                    delay *= BACKOFF_FACTOR
    except TimeoutError:
        raise ReviewError(f"POST {path}: no answer within {limit:g}s" + _last(last)) from None
    raise ReviewError(f"POST {path}: gave up after {BACKOFF_STEPS} tries" + _last(last))


def _last(err: BaseException | None) -> str:
    return f" (last error: {type(err).__name__}: {err})" if err is not None else ""
