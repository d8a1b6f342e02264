"""The outermost layer: a body cap enforced while reading, a request log without contents, and
a last catch so an unexpected exception is answered 500 and logged by type and place only.

Bodies are read here in full (they are at most 64 KiB) before the app sees them: a declared
``Content-Length`` over the cap is refused at once, and a body that grows past it while it
arrives (chunked, or lying about its length) is refused as soon as it does.
"""

from __future__ import annotations

import logging
import re
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from awa_tui.http.errors import error_response, internal_error_response

MAX_BODY_BYTES = 64 * 1024
log = logging.getLogger("awa_tui.http")

# A callback id is a capability (it completes a job): the log shows the route, not the id.
_CALLBACK_PATH = re.compile(r"^/api/callbacks/[^/]+")


class BodyTooLarge(Exception):
    pass


def loggable_path(path: str) -> str:
    return _CALLBACK_PATH.sub("/api/callbacks/{callback_id}", path)


class GuardMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            replay = await self._buffered(scope, receive)
            await self.app(scope, replay, send_noting_status)
        except BodyTooLarge:
            response = error_response(
                413,
                "body_too_large",
                f"The request body is over {self.max_body_bytes:,} bytes, this API's limit.",
                {"Connection": "close"},
            )
            await response(scope, receive, send_noting_status)
        except Exception as exc:
            # Not re-raised: uvicorn would log the traceback, whose message may carry a value.
            # Once a response started, the app's handler for Exception has answered and logged.
            if not status:
                await internal_error_response(exc)(scope, receive, send_noting_status)
        finally:
            log.info(
                "%s %s %s %d %.1f ms",
                _client(scope),
                scope["method"],
                loggable_path(scope["path"]),
                status,
                (time.perf_counter() - started) * 1000,
            )

    async def _buffered(self, scope: Scope, receive: Receive) -> Receive:
        """Read the whole body, refusing it past the cap; a receive that replays it."""
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            raise BodyTooLarge
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                return _replaying(message, receive)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise BodyTooLarge
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        return _replaying({"type": "http.request", "body": body, "more_body": False}, receive)


def _replaying(first: Message, receive: Receive) -> Receive:
    """``first``, then whatever ``receive`` says next (a disconnect)."""
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"
