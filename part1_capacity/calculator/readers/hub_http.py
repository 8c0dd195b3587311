"""The Hub's HTTP, bounded: a small client on ``httpx`` for ``hub.py`` that no server can keep waiting, fill memory or
send round a redirect loop.

- Time: one deadline per request and one for all the requests of a command (``start_command``), enforced on every
  socket connect, read and write through an ``httpcore`` network backend — the per-read time-out alone lets a
  server keep a request alive forever by sending a byte at a time, in the body or in the headers.
- Size: each answer streamed (``iter_raw``, ``Accept-Encoding: identity``: no decompression bomb) with a cap
  checked on ``Content-Length`` before reading and on the bytes while reading; a range whose server ignores
  ``Range`` is read only as far as asked.
- Redirects: followed by hand (``httpx`` reads a redirect's whole body before following it), at most
  ``MAX_REDIRECTS``, to http(s) only, the token sent to the endpoint's own host only.
- Errors: one ``InputError`` line, the Hub's own error codes (``X-Error-Code``) named as ``huggingface_hub`` names
  them (RepoNotFound, GatedRepo, RevisionNotFound, EntryNotFound).
"""
from __future__ import annotations

import dataclasses
import time

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError

REQUEST_SECONDS = 30.0               # default deadline of one request (CAPACITY_HUB_REQUEST_DEADLINE)
COMMAND_SECONDS = 120.0              # default deadline of all the Hub requests of a command (CAPACITY_HUB_DEADLINE)
ERROR_MAX_BYTES = 64 * 1024          # an error answer's body: its first line is all a message shows
MAX_REDIRECTS = 5


# --- time: one deadline per request and one per command ----------------------------------------------------------
_COMMAND = {"started": None}


def start_command() -> None:
    """A new command starts: its Hub deadline counts from its first request (``cli.main`` calls this)."""
    _COMMAND["started"] = None


class _Clock:
    """The end of the current request: its own deadline or the command's, whichever comes first."""

    def __init__(self, env: dict):
        self.request, self.command = env["request_deadline"], env["command_deadline"]
        if _COMMAND["started"] is None:
            _COMMAND["started"] = time.monotonic()
        self.command_end = _COMMAND["started"] + self.command
        self.end = self.command_end

    def begin(self) -> None:
        self.end = min(time.monotonic() + self.request, self.command_end)

    def left(self) -> float:
        return self.end - time.monotonic()

    def which(self) -> str:
        return (f"the command's {self.command:g} s (CAPACITY_HUB_DEADLINE)" if self.end >= self.command_end
                else f"the request's {self.request:g} s (CAPACITY_HUB_REQUEST_DEADLINE)")


class _Late(Exception):
    """A request past its deadline (raised by the socket reads and the read loops)."""


def _backend(clock: _Clock):
    """An ``httpcore`` network backend whose every connect, read and write waits at most until ``clock.end``:
    the per-read time-out alone lets a server keep a request alive forever by sending a byte at a time."""
    import httpcore

    def bounded(timeout):
        left = clock.left()
        if left <= 0:
            raise httpcore.ReadTimeout("the deadline passed")
        return left if timeout is None else min(timeout, left)

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner):
            self.inner = inner

        def read(self, max_bytes, timeout=None):
            return self.inner.read(max_bytes, bounded(timeout))

        def write(self, buffer, timeout=None):
            return self.inner.write(buffer, bounded(timeout))

        def close(self):
            return self.inner.close()

        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            return Stream(self.inner.start_tls(ssl_context, server_hostname, bounded(timeout)))

        def get_extra_info(self, info):
            return self.inner.get_extra_info(info)

    class Backend(httpcore.SyncBackend):
        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            return Stream(super().connect_tcp(host, port, bounded(timeout), local_address, socket_options))

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            return Stream(super().connect_unix_socket(path, bounded(timeout), socket_options))

    return Backend()


# --- the bounded client -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Answer:
    status: int
    headers: dict
    body: bytes
    url: str


class Client:
    """GET and HEAD with a deadline, a size cap and hand-followed redirects; errors as one ``InputError`` line."""

    def __init__(self, env: dict, at: str):
        import httpx

        self.env, self.at, self.clock = env, at, _Clock(env)
        timeout = httpx.Timeout(env["download_timeout"], connect=env["timeout"])
        self.http = httpx.Client(timeout=timeout, follow_redirects=False, trust_env=True,
                                 headers={"Accept-Encoding": "identity", "User-Agent": "capacity-calculator"})
        backend = _backend(self.clock)
        for transport in [self.http._transport, *self.http._mounts.values()]:
            pool = getattr(transport, "_pool", None)
            if pool is not None and hasattr(pool, "_network_backend"):
                pool._network_backend = backend       # every socket this client opens: bounded by the clock

    def close(self):
        self.http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def get(self, url: str, cap: int, what: str, start: int | None = None, end: int | None = None,
            head: bool = False, short_ok: bool = False) -> _Answer:
        """The answer to GET (or HEAD) ``url``: at most ``cap`` bytes of body. With a range [start, end], exactly
        those bytes: a server that ignores ``Range`` (200) is read only up to ``end`` and sliced; one that sends
        fewer is refused."""
        import httpx

        self.clock.begin()
        headers = {}
        if start is not None:
            headers["Range"] = f"bytes={start}-{end}"
        origin = httpx.URL(self.env["endpoint"])
        try:
            for _ in range(MAX_REDIRECTS + 1):
                u = httpx.URL(url)
                h = dict(headers)
                if self.env["token"] and (u.scheme, u.host, u.port) == (origin.scheme, origin.host, origin.port):
                    h["Authorization"] = f"Bearer {self.env['token']}"   # never to another host
                with self.http.stream("HEAD" if head else "GET", u, headers=h) as r:
                    if r.status_code in (301, 302, 303, 307, 308) and r.headers.get("location"):
                        nxt = u.join(r.headers["location"])
                        if nxt.scheme not in ("http", "https"):
                            raise InputError(f"model: the Hub at {self.env['endpoint']} redirected {self.at} to a "
                                             f"{validate.show(nxt.scheme)} address; only http(s) is followed")
                        url = str(nxt)
                        continue
                    if r.status_code >= 400:
                        body = b"" if head else self._read(r, ERROR_MAX_BYTES, what, cut=True)
                        self._refuse(r.status_code, r.headers, body, what)
                    if head:
                        return _Answer(r.status_code, dict(r.headers), b"", url)
                    if start is None:
                        return _Answer(r.status_code, dict(r.headers), self._read(r, cap, what), url)
                    if r.status_code == 206:
                        body = self._read(r, min(cap, end - start + 1), what, cut=True)
                    else:                        # Range ignored: the file from byte 0, read only as far as asked
                        body = self._read(r, end + 1, what, cut=True)[start:]
                    if len(body) < end - start + 1 and not short_ok:
                        raise InputError(f"model: the Hub at {self.env['endpoint']} sent {len(body):,} bytes of "
                                         f"{what} of {self.at} where {end - start + 1:,} were asked "
                                         f"(bytes {start}-{end})")
                    return _Answer(r.status_code, dict(r.headers), body, url)
            raise InputError(f"model: the Hub at {self.env['endpoint']} redirected {what} of {self.at} more than "
                             f"{MAX_REDIRECTS} times (a redirect loop)")
        except (_Late, httpx.TimeoutException):
            if self.clock.left() <= 0:
                raise InputError(f"model: the Hub at {self.env['endpoint']} did not finish sending {what} of "
                                 f"{self.at} within {self.clock.which()}: check the network or HF_ENDPOINT; the "
                                 f"deadlines are settable") from None
            raise InputError(f"model: the Hub at {self.env['endpoint']} sent nothing for {what} of {self.at} "
                             f"within {self.env['download_timeout']:g} s (HF_HUB_DOWNLOAD_TIMEOUT): check the network "
                             f"or HF_ENDPOINT") from None
        except httpx.HTTPError as exc:          # refused connections, a broken answer, a bad address
            raise InputError(f"model: cannot reach the Hub at {self.env['endpoint']} for {self.at} "
                             f"({type(exc).__name__}: {_first_line(exc)}): check the network or HF_ENDPOINT") from None

    def _read(self, r, cap: int, what: str, cut: bool = False) -> bytes:
        """At most ``cap`` bytes of the body, streamed: a ``Content-Length`` over the cap refused before reading,
        a body that grows past it refused (``cut``: stopped there, for a range or an error's first line)."""
        declared = r.headers.get("content-length", "")
        if not cut and declared.isdigit() and int(declared) > cap:
            raise InputError(f"model: the Hub at {self.env['endpoint']} answers {int(declared):,} bytes for {what} "
                             f"of {self.at}; at most {cap:,} are read")
        chunks, size = [], 0
        for chunk in r.iter_raw():
            if self.clock.left() <= 0:
                raise _Late()
            chunks.append(chunk)
            size += len(chunk)
            # exactly ``cap`` bytes so far is not yet too many: only a byte past it says the body is over the cap
            # (stopping at ``size == cap`` took a 3 GB answer whose chunks happened to add up to the cap as whole)
            if not cut and size > cap:
                raise InputError(f"model: the Hub at {self.env['endpoint']} sent more than {cap:,} bytes for "
                                 f"{what} of {self.at} (its Content-Length said "
                                 f"{declared or 'nothing'}); at most {cap:,} are read")
            if cut and size >= cap:
                break
        return b"".join(chunks)[:cap]

    def _refuse(self, status: int, headers, body: bytes, what: str):
        code = headers.get("x-error-code", "")
        msg = headers.get("x-error-message", "") or body.decode("utf-8", "replace")
        msg = validate.printable((msg.strip().splitlines() or [""])[0][:200])
        endpoint, at = self.env["endpoint"], self.at
        if code == "GatedRepo" or (status == 403 and "gated" in msg.lower()):
            raise InputError(f"model: {at} is gated: accept its terms on the Hub and set HF_TOKEN to a token that "
                             f"may read it")
        if code == "RevisionNotFound":
            repo, _, rev = at.partition("@")
            raise InputError(f"model: {repo} has no revision {rev!r} (--revision: a branch, tag or commit)")
        if code == "RepoNotFound" or (status == 401 and what == "the file list"):
            raise InputError(f"model: no Hub repository {at.partition('@')[0]} at {endpoint} (or it is private and "
                             f"HF_TOKEN does not grant it); a local path must exist")
        if code == "EntryNotFound" or status == 404:
            raise InputError(f"model: {at}: {what} is not in the repository ({status}{': ' + msg if msg else ''})")
        raise InputError(f"model: the Hub at {endpoint} answered {status} for {what} of {at}"
                         f"{': ' + msg if msg else ''}")


def _first_line(exc) -> str:
    return validate.printable((str(exc).strip().splitlines() or [type(exc).__name__])[0][:200])


