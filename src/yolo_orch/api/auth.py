"""Bearer tokens with scopes. The server keeps only SHA-256 hashes of the tokens
(`yolo-orch token create` makes one) and compares them in constant time.

Once any token is configured, every path needs one except the probes, the API pages' assets, the
dashboard's page and files (`/`, `/ui`; it asks for a token and sends it to the API), and
what the settings open (`/metrics` with `metrics_public`; `/docs`, `/redoc` and `/openapi.json`
unless `docs_require_token`). The token is checked by `BearerAuth`, in front of the app, so that
a request without a valid one is answered 401 before anything reads or parses its body; the
routes then only check that the token's scope allows them (403). One route takes a key of its
own in place of a token: a managed dataset's item image with `?key=` (the URLs pushed to Label
Studio, whose pages load images with no Authorization header); the route checks the key."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import Depends, Request
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as AsgiScope

from yolo_orch.api.docs import ASSETS_URL
from yolo_orch.api.problems import error_response
from yolo_orch.config import Scope, Token
from yolo_orch.errors import Forbidden, Unauthorized
from yolo_orch.ui import UI_ASSETS_URL, UI_PATHS

PROBE_PATHS = frozenset({"/healthz", "/readyz"})
DOCS_PATHS = frozenset({"/docs", "/redoc", "/openapi.json"})
_GRANTED = "token_scopes"
"""Where `BearerAuth` leaves the scopes of a request's token, in the request's state."""
_ACTOR = "token_actor"
"""Where it leaves who the token is (`actor`)."""
ANONYMOUS = "anonymous"
"""Who a request is when the server has no tokens."""
_ITEM_IMAGE = re.compile(r"/v1/datasets/[^/]+/items/[^/]+/image")
LABELLING_PATHS = ("/ls/", "/v1/datasets")
"""Where a token of the `labelling` scope alone may go: Label Studio's ML backend, which may
send it as the password of Basic auth (a Label Studio connection's only way), and the managed
datasets (their item images)."""


class TokenCheck:
    """Which paths need a token, and what a token may do."""

    def __init__(
        self, tokens: Sequence[Token], *, metrics_public: bool, docs_require_token: bool
    ) -> None:
        self._tokens = tuple(tokens)
        open_paths = set(PROBE_PATHS) | UI_PATHS  # the dashboard holds no data: the API does
        if metrics_public:
            open_paths.add("/metrics")
        if not docs_require_token:
            open_paths |= DOCS_PATHS
        self._open = frozenset(open_paths)

    @property
    def enabled(self) -> bool:
        return bool(self._tokens)

    def needs_token(self, path: str) -> bool:
        if not self._tokens:
            return False
        path = path.rstrip("/") or "/"
        return path not in self._open and not path.startswith(
            (f"{ASSETS_URL}/", f"{UI_ASSETS_URL}/")
        )

    def scopes(self, authorization: str, *, basic: bool = False) -> tuple[frozenset[Scope], str]:
        """The scopes the token in an `Authorization` header grants, and who it is (its name
        in the config, else `token:` and the start of its hash); `Unauthorized` when there is
        no bearer token (with `basic`, or Basic auth whose password is the token) or it is not
        one of ours."""
        kind, _, token = authorization.partition(" ")
        if basic and kind.lower() == "basic":
            token = _basic_password(token)
        elif kind.lower() != "bearer":
            token = ""
        if not token.strip():
            raise Unauthorized("a bearer token is required (Authorization: Bearer <token>)")
        digest = hashlib.sha256(token.strip().encode()).hexdigest()
        # Compare against every configured hash, so timing says nothing about which matched.
        matched = [entry for entry in self._tokens if hmac.compare_digest(digest, entry.sha256)]
        if not matched:
            raise Unauthorized("the bearer token is not valid")
        names = [entry.name for entry in matched if entry.name]
        actor = names[0] if names else f"token:{digest[:12]}"
        return frozenset(entry.scope for entry in matched), actor


def allowed_path(granted: frozenset[Scope], path: str) -> bool:
    """A token of the `labelling` scope alone goes to `LABELLING_PATHS` only."""
    return granted != {Scope.LABELLING} or path.startswith(LABELLING_PATHS)


def _keyed_image(path: str, query: bytes) -> bool:
    """A dataset item's image asked for with the dataset's image key (`?key=`), which its
    route checks in place of a token."""
    return _ITEM_IMAGE.fullmatch(path) is not None and "key" in parse_qs(query.decode("latin-1"))


def _basic_password(credentials: str) -> str:
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return decoded.partition(":")[2]


class BearerAuth:
    """Pure ASGI, outside the app: FastAPI would decode a JSON body, and refuse a bad one with
    422, before it ran any dependency."""

    def __init__(self, app: ASGIApp, *, check: TokenCheck) -> None:
        self._app = app
        self._check = check

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"].removeprefix(scope.get("root_path", ""))
            if self._check.needs_token(path) and not _keyed_image(path, scope["query_string"]):
                try:
                    granted, actor = self._check.scopes(
                        Headers(scope=scope).get("authorization", ""),
                        basic=path.startswith("/ls/"),
                    )
                except Unauthorized as exc:
                    await error_response(exc)(scope, receive, send)
                    return
                if not allowed_path(granted, path):
                    refused = Forbidden(
                        "a token of the 'labelling' scope is for /ls/ and /v1/datasets only"
                    )
                    await error_response(refused)(scope, receive, send)
                    return
                state = scope.setdefault("state", {})
                state[_GRANTED] = granted
                state[_ACTOR] = actor
        await self._app(scope, receive, send)


async def require_admin(request: Request) -> None:
    """A dependency for the routes that delete jobs or change the registry: an admin token only
    (every valid token may do the rest). Async, so that FastAPI does not hand it to a worker
    thread."""
    granted: frozenset[Scope] | None = getattr(request.state, _GRANTED, None)
    if granted is not None and Scope.ADMIN not in granted:  # None: no tokens configured
        raise Forbidden("this token's scope does not allow this; it needs 'admin'")


admin_scope = Depends(require_admin)


async def require_models_write(request: Request) -> None:
    """A dependency for the routes that move or delete model aliases: `models:write` or
    `admin`."""
    granted: frozenset[Scope] | None = getattr(request.state, _GRANTED, None)
    if granted is not None and not granted & {Scope.MODELS_WRITE, Scope.ADMIN}:
        raise Forbidden("this token's scope does not allow this; it needs 'models:write'")


models_write_scope = Depends(require_models_write)


async def require_labelling(request: Request) -> None:
    """A dependency for Label Studio's routes (/ls/): `labelling` or `admin`."""
    granted: frozenset[Scope] | None = getattr(request.state, _GRANTED, None)
    if granted is not None and not granted & {Scope.LABELLING, Scope.ADMIN}:
        raise Forbidden("this token's scope does not allow this; it needs 'labelling'")


labelling_scope = Depends(require_labelling)


async def require_labelling_write(request: Request) -> None:
    """A dependency for a dataset's sync with Label Studio (push, pull): `models:write`,
    `labelling` or `admin`."""
    granted: frozenset[Scope] | None = getattr(request.state, _GRANTED, None)
    if granted is not None and not granted & {Scope.MODELS_WRITE, Scope.LABELLING, Scope.ADMIN}:
        raise Forbidden("this token's scope does not allow this; it needs 'models:write'")


labelling_write_scope = Depends(require_labelling_write)


async def actor_of(request: Request) -> str:
    """Who asked (recorded with what it changed): the token's name, or `anonymous` when the
    server has no tokens."""
    actor: str = getattr(request.state, _ACTOR, ANONYMOUS)
    return actor


Actor = Annotated[str, Depends(actor_of)]
