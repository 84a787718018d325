"""Bearer tokens with scopes. The server keeps only SHA-256 hashes of the tokens
(`yolo-orch token create` makes one), compares them in constant time, and needs a token on every
/v1 route once any is configured."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable

from fastapi import Depends, Request

from yolo_orch.api.deps import ServicesDep
from yolo_orch.config import Scope
from yolo_orch.errors import Forbidden, Unauthorized


def require(scope: Scope) -> Callable[..., Awaitable[None]]:
    """A dependency that lets a request through only with a token of `scope` (admin tokens
    may do everything). Async, so that FastAPI does not hand it to a worker thread."""

    async def check(request: Request, services: ServicesDep) -> None:
        tokens = services.settings.tokens
        if not tokens:
            return
        header = request.headers.get("authorization", "")
        kind, _, token = header.partition(" ")
        if kind.lower() != "bearer" or not token:
            raise Unauthorized("a bearer token is required (Authorization: Bearer <token>)")
        digest = hashlib.sha256(token.strip().encode()).hexdigest()
        # Compare against every configured hash, so timing says nothing about which matched.
        scopes = {entry.scope for entry in tokens if hmac.compare_digest(digest, entry.sha256)}
        if not scopes:
            raise Unauthorized("the bearer token is not valid")
        if scope not in scopes and Scope.ADMIN not in scopes:
            raise Forbidden(f"this token's scope does not allow this; it needs {scope!r}")

    return check


jobs_scope = Depends(require(Scope.JOBS))
admin_scope = Depends(require(Scope.ADMIN))
