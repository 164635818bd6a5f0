"""The server of ``privgames viz``: Solara on 127.0.0.1 behind a guard that trusts no browser.

A server on 127.0.0.1 is reachable by every local user (a shared lab machine, a Ray head node)
and, through DNS rebinding or a websocket opened by another site, by any page the user visits.
So every HTTP request and websocket must

* come from a process of the user who started the server, where the operating system tells
  (Linux: the owner of the client's socket in ``/proc/net/tcp``): another local user is
  refused even with the token or the cookie;
* name this server as ``Host`` (``127.0.0.1:PORT`` or ``localhost:PORT``);
* come from this server's own origin when it says where it comes from (``Origin``), and say
  so on every request that can change state (any method but ``GET``, ``HEAD``, ``OPTIONS``:
  Solara's beacons that close a session), which a browser always does: the XSRF check;
* carry the secret token made at start, printed in the URL as Jupyter does: ``?token=...``
  once, answered with a redirect to the same path without it and an ``HttpOnly``,
  ``SameSite=Strict`` cookie that holds not the token but a second secret of this server's.
  Browsers send a host's cookies to all its ports, so a page another local user serves on
  127.0.0.1 may read that cookie; it is worth nothing to them (the first rule), and nothing to
  their page in the user's browser (the second and third), and cannot open the token's URL.
  ``privgames viz --no-token`` drops the token and the cookie alone.

Anything else gets 403 (a closed websocket) and a line saying why. Every response forbids
framing (``X-Frame-Options: DENY``, CSP ``frame-ancestors 'none'``), MIME sniffing and the
``Referer``. The pages themselves live in :mod:`privgames.analysis.viz`; this module imports
nothing of Solara until :func:`serve`.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

HOST = "127.0.0.1"
#: Where ``--results`` and ``--data`` point (set by :func:`serve` for the pages).
RESULTS_ENV = "PRIVGAMES_RESULTS"
DATA_ENV = "PRIVGAMES_DATA"
#: How long a session outlives its dropped connection (a reload comes back within it).
CULL_TIMEOUT = "60s"
#: Methods that change nothing (every other one needs this server's ``Origin``).
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
#: Headers on every HTTP response: no framing by another page, no MIME sniffing, no Referer.
SECURITY_HEADERS = [(b"x-frame-options", b"DENY"),
                    (b"content-security-policy", b"frame-ancestors 'none'"),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer")]


def new_token() -> str:
    """A fresh secret for one server start (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def peer_uid(client: tuple[str, int] | None, port: int) -> int | None:
    """The user id that owns the client's end of a TCP connection to this server's ``port``
    on 127.0.0.1, read from ``/proc/net/tcp`` (Linux); ``None`` where it cannot be told."""
    if client is None:
        return None
    host, client_port = client
    try:
        address = ipaddress.ip_address(host)
        with open("/proc/net/tcp") as f:
            lines = f.readlines()[1:]
    except (OSError, ValueError):
        return None
    if address.version != 4:
        return None
    local = f"{int.from_bytes(address.packed, 'little'):08X}:{client_port:04X}"
    remote = f"{int.from_bytes(ipaddress.ip_address(HOST).packed, 'little'):08X}:{port:04X}"
    for line in lines:
        fields = line.split()
        if fields[1] == local and fields[2] == remote:
            return int(fields[7])
    return None


class Guard:
    """ASGI middleware: refuse another user's process, a foreign ``Host`` or ``Origin``, a
    state-changing request without this server's ``Origin``, and a request without the token
    or this server's cookie (``token=None``: no token asked)."""

    def __init__(self, app: Any, port: int, token: str | None) -> None:
        self.app, self.token, self.port = app, token, port
        self.hosts = {f"{HOST}:{port}", f"localhost:{port}"}
        self.origins = {f"http://{host}" for host in self.hosts}
        self.cookie = f"privgames-{port}"
        self.session = new_token()  # the cookie's value: never the token
        self.uid = os.getuid()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        owner = peer_uid(scope.get("client"), self.port)
        if owner is not None and owner != self.uid:
            return await self._refuse(scope, send, "this server answers only to the user who "
                                      "started it")
        if headers.get("host") not in self.hosts:
            return await self._refuse(scope, send, "this server answers only to its own Host")
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            return await self._refuse(scope, send, f"a request from {origin[:80]} is refused")
        if (scope["type"] == "http" and scope.get("method", "GET") not in SAFE_METHODS
                and origin is None):
            return await self._refuse(scope, send, "a request that changes state must come "
                                      "from this server's own page (Origin)")
        if self.token is None:
            return await self.app(scope, receive, _secured(send))
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = dict(query).get("token")
        if given is not None and scope["type"] == "http" and _same(given, self.token):
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            return await self._enter(send, _local_path(scope) + (f"?{rest}" if rest else ""))
        if any(_same(value, self.session) for value in _cookies(headers, self.cookie)):
            return await self.app(scope, receive, _secured(send))
        return await self._refuse(scope, send, "open the address with the token that "
                                  "privgames viz printed when it started (...?token=...)")

    async def _enter(self, send: Any, location: str) -> None:
        cookie = f"{self.cookie}={self.session}; Path=/; HttpOnly; SameSite=Strict"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", location.encode("ascii")),
                                (b"set-cookie", cookie.encode()),
                                (b"cache-control", b"no-store"), *SECURITY_HEADERS]})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _refuse(scope: dict, send: Any, why: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": why[:120]})
            return
        body = f"privgames viz: 403 forbidden: {why}\n".encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode()),
                                *SECURITY_HEADERS]})
        await send({"type": "http.response.body", "body": body})


def _same(given: str, secret: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), secret.encode())


def _cookies(headers: dict[str, str], name: str) -> list[str]:
    """Every value the ``Cookie`` header gives ``name`` (another port's page may have set one
    more of the same name: any of them may be this server's)."""
    found = []
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            found.append(value)
    return found


def _local_path(scope: dict) -> str:
    """The request's path as a redirect's target on this server: percent-encoded ASCII, and
    one leading slash (``//evil.example/x`` would name another host)."""
    path = scope.get("root_path", "") + scope["path"]
    return "/" + quote(path.lstrip("/"), safe="/:@!$&'()*+,;=-._~")


def _secured(send: Any) -> Any:
    """``send`` with :data:`SECURITY_HEADERS` added to every HTTP response's start."""
    async def secured(message: dict) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []),
                                              *SECURITY_HEADERS]}
        await send(message)

    return secured


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
    # A session's model is freed when its browser leaves (Solara's beacon on closing a tab) or
    # a minute after its connection dropped: not after Solara's default day.
    os.environ.setdefault("SOLARA_KERNEL_CULL_TIMEOUT", CULL_TIMEOUT)
    for name, folder in ((RESULTS_ENV, results), (DATA_ENV, data)):
        if folder is not None:
            os.environ[name] = os.path.abspath(folder)  # as given: messages name it so
    from solara.server.starlette import app

    uvicorn.run(Guard(app, port, token), host=HOST, port=port, log_level="warning")
