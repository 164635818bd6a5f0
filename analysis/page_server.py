"""The server of ``privgames viz``: Solara on 127.0.0.1 behind a guard that trusts no browser.

A server on 127.0.0.1 is reachable by every local user (a shared lab machine, a Ray head node)
and, through DNS rebinding or a websocket opened by another site, by any page the user visits.
So every HTTP request and websocket must

* name this server as ``Host`` (``127.0.0.1:PORT`` or ``localhost:PORT``),
* come from this server's own origin when it says where it comes from (``Origin``), and
* carry the secret token made at start, printed in the URL as Jupyter does: ``?token=...``
  once (answered with an ``HttpOnly``, ``SameSite=Strict`` cookie and a redirect to the same
  address without it), the cookie after. ``privgames viz --no-token`` drops the token alone.

Anything else gets 403 (a closed websocket) and a line saying why. The pages themselves live in
:mod:`privgames.analysis.viz`; this module imports nothing of Solara until :func:`serve`.
"""

from __future__ import annotations

import hmac
import os
import secrets
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

HOST = "127.0.0.1"
#: Where ``--results`` and ``--data`` point (set by :func:`serve` for the pages).
RESULTS_ENV = "PRIVGAMES_RESULTS"
DATA_ENV = "PRIVGAMES_DATA"


def new_token() -> str:
    """A fresh secret for one server start (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


class Guard:
    """ASGI middleware: refuse a foreign ``Host`` or ``Origin``, and a request without the
    token (``token=None``: no token asked)."""

    def __init__(self, app: Any, port: int, token: str | None) -> None:
        self.app, self.token = app, token
        self.hosts = {f"{HOST}:{port}", f"localhost:{port}"}
        self.origins = {f"http://{host}" for host in self.hosts}
        self.cookie = f"privgames-token-{port}"

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        if headers.get("host") not in self.hosts:
            return await self._refuse(scope, send, "this server answers only to its own Host")
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            return await self._refuse(scope, send, f"a request from {origin} is refused")
        if self.token is None:
            return await self.app(scope, receive, send)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = dict(query).get("token")
        if given is not None and scope["type"] == "http" and self._valid(given):
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            return await self._enter(send, scope.get("root_path", "") + scope["path"]
                                     + (f"?{rest}" if rest else ""))
        cookie = SimpleCookie(headers.get("cookie", "")).get(self.cookie)
        if cookie is not None and self._valid(cookie.value):
            return await self.app(scope, receive, send)
        return await self._refuse(scope, send, "open the address with the token that "
                                  "privgames viz printed when it started (...?token=...)")

    def _valid(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token.encode())

    async def _enter(self, send: Any, location: str) -> None:
        cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", location.encode("latin-1")),
                                (b"set-cookie", cookie.encode()),
                                (b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _refuse(scope: dict, send: Any, why: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": why[:120]})
            return
        body = f"privgames viz: 403 forbidden: {why}\n".encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def url(port: int, page: str, token: str | None) -> str:
    """The address to open: ``http://127.0.0.1:PORT/PAGE?token=...``."""
    return f"http://{HOST}:{port}/{page}" + (f"?token={token}" if token else "")


def serve(port: int, token: str | None, results: Path | None = None,
          data: Path | None = None) -> None:
    """Serve the pages on ``HOST:port`` behind :class:`Guard` until interrupted."""
    import uvicorn

    os.environ["SOLARA_APP"] = "privgames.analysis.viz"
    os.environ["SERVER_NAME"], os.environ["SERVER_PORT"] = HOST, str(port)
    os.environ.setdefault("SOLARA_TELEMETRY_MIXPANEL_ENABLE", "False")
    for name, folder in ((RESULTS_ENV, results), (DATA_ENV, data)):
        if folder is not None:
            os.environ[name] = os.path.abspath(folder)  # as given: messages name it so
    from solara.server.starlette import app

    uvicorn.run(Guard(app, port, token), host=HOST, port=port, log_level="warning")
