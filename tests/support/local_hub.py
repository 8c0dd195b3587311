"""A small Hugging Face Hub on 127.0.0.1 for the tests: the few routes ``huggingface_hub`` uses to read a model.

- ``GET /api/models/<org>/<name>`` and ``.../revision/<rev>``: the repository's commit and file list;
- ``HEAD``/``GET /<org>/<name>/resolve/<rev>/<file>``: a file, with ``Range: bytes=a-b`` (206 Partial Content),
  ``X-Repo-Commit`` and ``ETag`` as the Hub sends them;
- errors as the Hub marks them (``X-Error-Code``: RepoNotFound, GatedRepo, RevisionNotFound, EntryNotFound).

Every request is recorded (method, path, Range, bytes sent), so a test can check that no weights were read.

A repository may also be hostile (``Repo.hostile``: what it does, per answer — ``"api"`` for the file list, else a
file's name): ``trickle`` (one byte every ``TRICKLE_S`` of the body), ``trickle-headers`` (the status line and
headers that slowly), ``huge`` (a ``Content-Length`` of 3 GB, zeros until the client leaves), ``endless`` (no
length, zeros until the client leaves), ``redirect-loop`` (every answer a redirect to itself), ``lying-short`` (a
``Content-Length`` shorter than the body), ``lying-long`` (longer: the connection closes early), ``no-range``
(``Range`` ignored: the whole file, 200).
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field

TRICKLE_S = 0.5         # seconds between two bytes of a trickling answer
CHUNK = 64 * 1024
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Repo:
    files: dict                      # file name → bytes
    sha: str = "0" * 40
    gated: bool = False              # answers only a request with a bearer token "good"
    delay: float = 0.0               # seconds before every answer (a slow Hub)
    revisions: tuple = ("main",)
    hostile: dict = field(default_factory=dict)   # "api" or a file name → a behaviour (see the module's docstring)

    def __post_init__(self):
        if self.sha == "0" * 40:
            self.sha = hashlib.sha1(b"".join(sorted(self.files.values()))).hexdigest()


@dataclass
class Hub:
    repos: dict = field(default_factory=dict)
    log: list = field(default_factory=list)

    def start(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):       # quiet
                pass

            def do_HEAD(self):
                self.answer(head=True)

            def do_GET(self):
                self.answer(head=False)

            def fail(self, status, code, message="error"):
                body = json.dumps({"error": message}).encode()
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def answer(self, head):
                path = self.path.split("?")[0]
                rng = self.headers.get("Range")
                entry = {"method": self.command, "path": path, "range": rng, "sent": 0}
                hub.log.append(entry)
                m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?$", path)
                r = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
                repo_id = (m or r).group(1) if (m or r) else None
                repo = hub.repos.get(repo_id)
                if repo is None:
                    return self.fail(404, "RepoNotFound", "Repository not found")
                time.sleep(repo.delay)
                if repo.gated and self.headers.get("Authorization") != "Bearer good":
                    return self.fail(401, "GatedRepo", "Access to this model is restricted")
                rev = (m.group(2) if m else r.group(2)) or "main"
                if rev not in repo.revisions and rev != repo.sha:
                    return self.fail(404, "RevisionNotFound", "Invalid rev id")
                if m:
                    body = json.dumps({"id": repo_id, "modelId": repo_id, "sha": repo.sha, "private": False,
                                       "gated": False, "siblings": [{"rfilename": f} for f in sorted(repo.files)],
                                       "tags": []}).encode()
                    if repo.hostile.get("api"):
                        return self.hostile(repo.hostile["api"], body, entry, head)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if not head:
                        self.wfile.write(body)
                        entry["sent"] = len(body)
                    return
                name = r.group(3)
                if name not in repo.files:
                    return self.fail(404, "EntryNotFound", f"{name} does not exist")
                data = repo.files[name]
                if repo.hostile.get(name) and repo.hostile[name] != "no-range":
                    return self.hostile(repo.hostile[name], data, entry, head)
                if repo.hostile.get(name) == "no-range":
                    rng = None
                status, part = 200, data
                rm = re.match(r"bytes=(\d+)-(\d*)", rng or "")
                if rm and not head:
                    a = int(rm.group(1))
                    b = int(rm.group(2)) if rm.group(2) else len(data) - 1
                    part = data[a:b + 1]
                    status = 206
                self.send_response(status)
                self.send_header("X-Repo-Commit", repo.sha)
                self.send_header("ETag", '"' + hashlib.sha1(data).hexdigest() + '"')
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(data) if head else len(part)))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {a}-{a + len(part) - 1}/{len(data)}")
                self.end_headers()
                if not head:
                    for i in range(0, len(part), CHUNK):      # chunk by chunk: a client that leaves stops it
                        self.wfile.write(part[i:i + CHUNK])
                        entry["sent"] += len(part[i:i + CHUNK])

            def hostile(self, how, body, entry, head):
                """An answer as a hostile mirror gives it; bytes sent counted until the client leaves."""
                if how == "redirect-loop":
                    self.send_response(302)
                    self.send_header("Location", self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if how == "trickle-headers":
                    for b in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Slow: " + b"a" * 10_000:
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                        time.sleep(TRICKLE_S)
                    return
                self.send_response(200)
                length = {"trickle": len(body), "huge": 3 * 10 ** 9, "lying-short": 10,
                          "lying-long": len(body) + 1000}.get(how)
                if length is not None:
                    self.send_header("Content-Length", str(length))
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                if head:
                    return
                if how == "trickle":
                    for b in body:
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                        entry["sent"] += 1
                        time.sleep(TRICKLE_S)
                elif how in ("huge", "endless"):
                    zeros = b"\0" * CHUNK
                    while entry["sent"] < 3 * 10 ** 9:
                        self.wfile.write(zeros)
                        entry["sent"] += CHUNK
                else:                                  # lying-short, lying-long: the whole body, then the end
                    self.wfile.write(body)
                    entry["sent"] = len(body)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):   # a client that hung up (a timeout test): quiet
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # a short poll: stop() (shutdown) returns within 0.05 s, not the default 0.5 s, once per test
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
