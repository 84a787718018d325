"""A standby head (several servers on one PostgreSQL database, `ops/leadership.py`) answers reads
from the shared database itself and sends the rest to the active head: a 307, which keeps the
method and the body, to the same path there.

Sent on: every request that writes (any method but GET, HEAD and OPTIONS), and the reads that
follow what only the active head sees as it happens: event streams, long polls (`Prefer:
wait`) and a stream's snapshot. While no active head is known (a takeover under way) these get
503 `not_active_head` with `Retry-After: 1`; so does every request to a head that has lost its
lease and is stopping."""

from __future__ import annotations

from collections.abc import Callable

from starlette.datastructures import URL, Headers
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from yolo_orch.api.problems import error_response
from yolo_orch.errors import NotActiveHead
from yolo_orch.ops.leadership import Leadership, Role

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_LIVE_SUFFIXES = ("/events", "/snapshot.jpg")


class StandbyRedirect:
    """`leadership`: the head's, once the app has started (None: a single server)."""

    def __init__(self, app: ASGIApp, leadership: Callable[[], Leadership | None]) -> None:
        self.app = app
        self._leadership = leadership

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = self._leadership() if scope["type"] == "http" else None
        if head is None or head.role is Role.ACTIVE or not _sent_on(scope, head.role):
            await self.app(scope, receive, send)
            return
        if head.active_url is None or head.role is Role.LOST:
            why = (
                "this head has lost its lease and is stopping"
                if head.role is Role.LOST
                else "this head is a standby and no active head is known yet (a takeover is "
                "under way)"
            )
            await error_response(NotActiveHead(why))(scope, receive, send)
            return
        url = URL(scope=scope)
        target = URL(head.active_url.rstrip("/") + url.path)
        if url.query:
            target = target.replace(query=url.query)
        await RedirectResponse(str(target), status_code=307)(scope, receive, send)


def _sent_on(scope: Scope, role: Role) -> bool:
    if role is Role.LOST:
        return True
    if scope["method"] not in _SAFE_METHODS:
        return True
    path: str = scope["path"]
    return path.endswith(_LIVE_SUFFIXES) or "wait" in Headers(scope=scope).get("prefer", "")
