"""A Hugging Face Hub repository id as ``--model`` (``org/name``, ``org/name@revision``): read over HTTP, never the weights.

The few routes every Hugging Face tool reads (``huggingface_hub``'s ``model_info``, ``hf_hub_download`` and
``get_safetensors_metadata``), asked here by a small bounded client on ``httpx``: the repository's file list
(``/api/models/<id>[/revision/<rev>]``), its ``config.json``, and the header of every safetensors file —
``model.safetensors`` or the shards ``model.safetensors.index.json`` names — by HTTP range requests (the 8-byte
length and the JSON header, never the tensors). The bytes are exact (``weights_bytes_source: "safetensors"``); an
unquantized checkpoint's headers give the exact parameters too, so no model is built. A repository with GGUF files
and no safetensors: the GGUF header is read by range into a sparse file of the real size and parsed like a local GGUF.

A Hub mirror may be hostile (``HF_ENDPOINT``, or a stranger's repository); every answer is bounded (the HTTP side
in ``hub_http.py``):

- time: one deadline per request (``CAPACITY_HUB_REQUEST_DEADLINE``, default 30 s) and one for all the requests of
  a command (``CAPACITY_HUB_DEADLINE``, default 120 s), enforced on every socket read (a server trickling a byte a
  second is cut at the deadline, not kept alive by each byte), beside the per-read time-outs
  ``HF_HUB_ETAG_TIMEOUT`` / ``HF_HUB_DOWNLOAD_TIMEOUT``;
- size: each answer streamed with a cap checked before (``Content-Length``) and while reading (a server that lies
  about its length, or ignores ``Range`` and sends a whole weight file, is cut at the cap, never read whole);
- redirects: followed by hand, at most ``MAX_REDIRECTS``, to http(s) only, the token never sent to another host;
- names: the revision is checked like an id (no ``..`` segment, no leading ``/``, no control character) and every
  file name the server lists too, before either reaches a path or a URL;
- the Hub cache: ``config.json`` enters it (``HF_HOME``/``HF_HUB_CACHE``, in ``huggingface_hub``'s layout, so an
  offline run finds it) only once the model it describes was read without refusal: nothing refused is left there.

``HF_ENDPOINT``, ``HF_TOKEN``, ``HF_HUB_OFFLINE`` and ``HF_HOME``/``HF_HUB_CACHE`` are read when a repository is
asked for. Offline, the cached ``config.json`` is used and the weights are parameters × dtype. A missing or gated
repository, an unknown revision, a repository with nothing to read, an answer over a cap or past a deadline, no
network: one line (``InputError``, exit 2).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import struct
import tempfile
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.readers.hub_http import COMMAND_SECONDS, REQUEST_SECONDS, Client as _Client

# the Hub's rule for a repository id: an owner and a name, letters, digits, '-', '_', '.', at most 96 each
REPO_ID = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
GGUF_HEADER_START = 1 << 20          # bytes of a GGUF read first; quadrupled until its header parses
GGUF_HEADER_MAX = 256 << 20
GGUF_FILE_MAX = 1 << 44              # 16 TiB: larger than any model file; a bigger claimed size is refused
API_MAX_BYTES = 16 * validate.MIB    # a repository's file list: a few KB, the largest repositories a few MB
CONFIG_MAX_BYTES = 4 * validate.MIB  # a config.json: a few KB
INDEX_MAX_BYTES = 64 * validate.MIB  # a shard index: a few MB (the local reader's cap)
SAFETENSORS_PROBE = 100_000          # the first range of a safetensors file (huggingface_hub asks the same)
SAFETENSORS_HEADER_MAX = 25_000_000  # huggingface_hub's SAFETENSORS_MAX_HEADER_LENGTH
MAX_SHARDS = 10_000                  # the largest published checkpoints have a few hundred shards
MAX_REVISION = 255


def split(name: str) -> tuple[str, str | None, str | None]:
    """``org/name[/file.gguf][@revision]`` → (repo id, file or None, revision or None)."""
    rev = None
    if "@" in name:
        name, rev = name.rsplit("@", 1)
    parts = name.split("/")
    file = "/".join(parts[2:]) or None
    return "/".join(parts[:2]), file, rev


def looks_like_repo(name: str) -> bool:
    """``org/name`` (optionally ``/file.gguf`` and ``@revision``) that is not a local path. A revision is checked
    when the repository is read (``check_revision``): a bad one is refused as a revision, not taken for a path."""
    if name.startswith((".", "/", "~")) or Path(name).exists():
        return False
    repo, file, rev = split(name)
    if repo.lower().endswith((".json", ".gguf", ".safetensors", ".bin")):
        return False                       # a file's path (missing), not a repository
    return bool(REPO_ID.match(repo)) and (file is None or file.endswith(".gguf"))


def check_revision(rev: str, field: str = "revision") -> str:
    """A branch, tag or commit as safe as a repository id: it names a file under the Hub cache's ``refs/`` and a
    URL path segment, so no ``..`` segment, no leading ``/``, no empty segment, no backslash, no control
    character, at most ``MAX_REVISION`` characters."""
    r = str(rev)
    bad = (r == "" or len(r) > MAX_REVISION or r.startswith("/") or r.endswith("/") or "\\" in r
           or any(seg in ("", ".", "..") for seg in r.split("/")) or not r.isprintable() or r != r.strip())
    if bad:
        raise InputError(f"{field}: {validate.show(r)} is not a revision (a branch, tag or commit: no '..' segment, "
                         f"no leading '/', no control characters, at most {MAX_REVISION} characters)")
    return r


def _file_name(name, repo: str) -> str:
    """A file name the server lists: a relative path of printable segments (it reaches URLs and messages)."""
    if not isinstance(name, str) or not name or len(name) > 1024 or name.startswith("/") or "\\" in name \
            or not name.isprintable() or any(seg in ("", ".", "..") or len(seg.encode("utf-8", "replace")) > 255
                                             for seg in name.split("/")):
        raise InputError(f"model: the Hub lists a file of {repo} named {validate.show(name)}: not a file name")
    return name


def _seconds(name: str, default: float) -> float:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    return validate.parse_float(v, name, lo=0, hi=86_400, lo_open=True)


def _env() -> dict:
    """The Hugging Face settings as they stand now (the environment, else huggingface_hub's defaults)."""
    from huggingface_hub import constants

    def flag(name, default):
        v = os.environ.get(name)
        return default if v is None else v.strip().upper() in ("1", "ON", "YES", "TRUE")

    endpoint = (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
    if not re.match(r"^https?://[^\s/]+", endpoint) or not endpoint.isprintable():
        raise InputError(f"HF_ENDPOINT: {validate.show(endpoint)} is not an http(s) address")
    token = os.environ.get("HF_TOKEN") or None
    if token is None and not flag("HF_HUB_DISABLE_IMPLICIT_TOKEN", False):
        from huggingface_hub import get_token

        token = get_token()
    if token is not None and (not token.isprintable() or not token.isascii()):
        raise InputError("HF_TOKEN: holds characters no token has (a token is printable ASCII)")
    return {"endpoint": endpoint, "token": token,
            "offline": flag("HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE),
            "cache_dir": os.environ.get("HF_HUB_CACHE") or (os.path.join(os.environ["HF_HOME"], "hub")
                                                            if os.environ.get("HF_HOME") else constants.HF_HUB_CACHE),
            "timeout": _seconds("HF_HUB_ETAG_TIMEOUT", constants.HF_HUB_ETAG_TIMEOUT),
            "download_timeout": _seconds("HF_HUB_DOWNLOAD_TIMEOUT", constants.HF_HUB_DOWNLOAD_TIMEOUT),
            "request_deadline": _seconds("CAPACITY_HUB_REQUEST_DEADLINE", REQUEST_SECONDS),
            "command_deadline": _seconds("CAPACITY_HUB_DEADLINE", COMMAND_SECONDS)}


def _json(data: bytes, what: str, infinity: bool = False):
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"model: {what} is not UTF-8 text") from None
    return validate.loads_json(text, f"model: {what}", infinity)


# --- the repository --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Repo:
    client: _Client
    repo: str
    sha: str

    def url(self, file: str) -> str:
        return (f"{self.client.env['endpoint']}/{self.repo}/resolve/{self.sha}/"
                f"{quote(file, safe='/')}")

    def fetch(self, file: str, cap: int) -> bytes:
        return self.client.get(self.url(file), cap, file).body


def _file_list(client: _Client, repo: str, rev: str | None) -> tuple[str, list[str]]:
    """(the commit, the repository's files) from ``/api/models/<id>[/revision/<rev>]``."""
    url = f"{client.env['endpoint']}/api/models/{repo}" + (f"/revision/{quote(rev, safe='')}" if rev else "")
    d = _json(client.get(url, API_MAX_BYTES, "the file list").body, f"the Hub's file list of {repo}")
    if not isinstance(d, dict):
        raise InputError(f"model: the Hub's file list of {repo} is not a JSON object")
    sha = d.get("sha")
    if not isinstance(sha, str) or not COMMIT.match(sha):
        raise InputError(f"model: the Hub's file list of {repo} names no commit (sha {validate.show(sha)})")
    siblings = d.get("siblings") or []
    if not isinstance(siblings, list) or not all(isinstance(x, dict) for x in siblings):
        raise InputError(f"model: the Hub's file list of {repo} has no list of files ('siblings')")
    return sha, sorted(_file_name(x.get("rfilename"), repo) for x in siblings)


def profile_from_hub(name: str):
    """The calculator's profile of a Hub repository (``org/name``, ``org/name@rev``, ``org/name/file.gguf``)."""
    repo, file, rev = split(name)
    if rev is not None:
        check_revision(rev)
    if file is not None:
        _file_name(file, repo)
    env = _env()
    at = f"{repo}@{rev}" if rev else repo
    if env["offline"]:
        return _offline(repo, rev, env)
    with _Client(env, at) as client:
        sha, files = _file_list(client, repo, rev)
        r = _Repo(client, repo, sha)
        ggufs = [f for f in files if f.endswith(".gguf")]
        if file is not None or ("config.json" not in files and ggufs):
            return _from_gguf(r, file, ggufs)
        if "config.json" not in files:
            raise InputError(f"model: {repo} has no config.json and no .gguf file: nothing the calculator reads")
        raw = r.fetch("config.json", CONFIG_MAX_BYTES)
        d = _json(raw, f"{repo}/config.json", infinity=True)
        if not isinstance(d, dict):
            raise InputError(f"model: {repo}/config.json must hold a JSON object, not {type(d).__name__}")
        tensors = None
        if "model.safetensors.index.json" in files or "model.safetensors" in files:
            tensors = _safetensors_tensors(r, files)
        prof = _from_config(d, repo, sha, tensors)
        # read and checked: only now does config.json enter the cache, by the name asked for (main, a tag), so an
        # offline run finds it
        _cache_config(env, repo, rev or "main", sha, raw)
        return prof


def _offline(repo: str, rev: str | None, env: dict):
    """The cached config.json (``huggingface_hub``'s cache lookup: nothing asked of the network)."""
    from huggingface_hub import errors, hf_hub_download

    try:
        path = hf_hub_download(repo, "config.json", revision=rev, cache_dir=env["cache_dir"], local_files_only=True)
    except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled, FileNotFoundError, ValueError):
        raise InputError(f"model: HF_HUB_OFFLINE is set and {repo}{'@' + rev if rev else ''} is not in the Hub "
                         f"cache") from None
    d = validate.load_json_object(Path(path), "model", max_bytes=CONFIG_MAX_BYTES, infinity=True)
    return _from_config(d, repo, rev or "cached", None)


def _cache_config(env: dict, repo: str, rev: str, sha: str, raw: bytes) -> None:
    """config.json into the Hub cache as ``huggingface_hub`` lays it out (``blobs/<hash>``, ``snapshots/<commit>/``
    linking to it, ``refs/<rev>`` naming the commit); every path checked to stay inside the repository's folder.
    A cache that cannot be written is not an error of the model: the plan stands."""
    storage = Path(env["cache_dir"]) / ("models--" + repo.replace("/", "--"))
    try:
        blob = storage / "blobs" / hashlib.sha256(raw).hexdigest()
        snap = storage / "snapshots" / sha / "config.json"
        ref = storage / "refs" / rev
        root = storage.resolve()
        for p in (blob, snap, ref):
            p.parent.mkdir(parents=True, exist_ok=True)
            if root not in p.parent.resolve().parents and p.parent.resolve() != root:
                return
        for target, data in ((blob, raw), (ref, sha.encode())):
            if target.is_symlink() or (target.exists() and not target.is_file()):
                return
            with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as fh:
                fh.write(data)
            os.replace(fh.name, target)
        if not snap.exists() and not snap.is_symlink():
            try:
                snap.symlink_to(os.path.relpath(blob, snap.parent))
            except OSError:
                with tempfile.NamedTemporaryFile(dir=snap.parent, delete=False) as fh:
                    fh.write(raw)
                os.replace(fh.name, snap)
    except OSError:
        return


# --- safetensors headers by range --------------------------------------------------------------------------------
def _safetensors_tensors(r: _Repo, files: list[str]) -> list[tuple[str, str, tuple]]:
    """(name, dtype, shape) of every tensor of the checkpoint, from each shard's header (two ranges at most)."""
    from part1_capacity.calculator.readers import checkpoints

    weight_map = None
    if "model.safetensors.index.json" in files:
        d = _json(r.fetch("model.safetensors.index.json", INDEX_MAX_BYTES), f"{r.repo}/model.safetensors.index.json")
        if not isinstance(d, dict):
            raise InputError(f"model: {r.repo}/model.safetensors.index.json must hold a JSON object")
        weight_map = d.get("weight_map")
        names = checkpoints.index_shards(weight_map, f"{r.repo}/model.safetensors.index.json")
        if len(names) > MAX_SHARDS:
            raise InputError(f"model: {r.repo} names {len(names):,} shards; at most {MAX_SHARDS:,} are read")
        missing = [n for n in names if n not in files]
        if missing:
            raise InputError(f"model: {r.repo}/{validate.printable(missing[0])} is named in its index but not in the "
                             f"repository: the checkpoint is not whole")
        checkpoints.whole_sets([PurePosixPath(n) for n in names], "model.safetensors.index.json names")
    else:
        names = ["model.safetensors"]
    out, by_file = [], {}
    for n in names:
        by_file[n] = []
        for name, dtype, shape in _header(r, n):
            out.append((name, dtype, shape))
            by_file[n].append(name)
            if len(out) > 1_000_000:
                raise InputError(f"model: {r.repo} lists more than 1,000,000 tensors: more than any published "
                                 f"checkpoint")
    checkpoints.check_tensors_whole(by_file, weight_map, f"model: {r.repo}")
    return out


def _header(r: _Repo, file: str) -> list[tuple[str, str, tuple]]:
    """One safetensors file's tensors: its 8-byte header length, then the JSON header, by range."""
    first = _range(r, file, 0, SAFETENSORS_PROBE - 1, short_ok=True)
    if len(first) < 8:
        raise InputError(f"model: {r.repo}/{file} is not a safetensors file (shorter than its 8-byte header length)")
    n = struct.unpack("<Q", first[:8])[0]
    if not 2 <= n <= SAFETENSORS_HEADER_MAX:
        raise InputError(f"model: {r.repo}/{file} claims a safetensors header of {n:,} bytes; at most "
                         f"{SAFETENSORS_HEADER_MAX:,} are read")
    raw = first[8:8 + n] if len(first) >= 8 + n else _range(r, file, 8, 8 + n - 1)
    h = _json(raw, f"{r.repo}/{file}: its safetensors header")
    if not isinstance(h, dict):
        raise InputError(f"model: {r.repo}/{file}: its safetensors header is not a JSON object")
    out = []
    for name, t in h.items():
        if name == "__metadata__":
            continue
        where = f"model: {r.repo}/{file}: tensor {validate.show(name)}"
        if not isinstance(t, dict) or not isinstance(t.get("dtype"), str) or not isinstance(t.get("shape"), list) \
                or len(t["shape"]) > 8:
            raise InputError(f"{where}: not a tensor entry (a dtype and a shape of at most 8 dimensions)")
        shape = tuple(validate.number(x, f"{where}: shape", lo=0, hi=2 ** 40, integer=True) for x in t["shape"])
        out.append((name, t["dtype"], shape))
    return out


def _range(r: _Repo, file: str, start: int, end: int, short_ok: bool = False) -> bytes:
    """Bytes [start, end] of a file; ``short_ok``: a file shorter than ``end`` gives what it has."""
    return r.client.get(r.url(file), end - start + 1, file, start, end, short_ok=short_ok).body


def _from_config(d: dict, repo: str, sha: str, tensors):
    from part1_capacity.calculator.model import configs
    from part1_capacity.calculator.readers import checkpoints

    where = f"{repo}/config.json"
    if tensors is None:
        prof = configs.profile_from_config(d, where, model_id=repo)
        return dataclasses.replace(prof, hf_repo=repo, source=f"{prof.source}; Hub {repo}@{sha} (no safetensors: "
                                                              f"weights as parameters × dtype)")
    text = d.get("text_config") if isinstance(d.get("text_config"), dict) else d
    n_mtp = validate.number(text.get("num_nextn_predict_layers") or 0,
                            f"{where}: field 'num_nextn_predict_layers'", lo=0, hi=16, integer=True)
    quantized = bool(d.get("quantization_config") or (text or {}).get("quantization_config"))
    # an unquantized checkpoint's headers are its parameters: exact, and no model needs building
    params = None if quantized else [(n, s) for n, _, s in tensors]
    prof = configs.profile_from_config(d, where, model_id=repo, parameters=params)
    ckpt = checkpoints.checkpoint_from_tensors(tensors, prof.n_layers, n_mtp, f"hf://{repo}@{sha}",
                                              f"model: {repo}")
    return dataclasses.replace(prof, checkpoint=ckpt, hf_repo=repo,
                               source=f"{prof.source}; Hub {repo}@{sha}, {ckpt.n_tensors} safetensors headers "
                                      f"read by range")


# --- GGUF by range -------------------------------------------------------------------------------------------------
def _from_gguf(r: _Repo, file, ggufs: list):
    """A GGUF of the repository: its header read by HTTP range into a sparse local file of the real size."""
    from part1_capacity.calculator.readers import checkpoints

    repo = r.repo
    if file is None:
        if len(ggufs) != 1:
            shown = ", ".join(ggufs[:6]) + (", …" if len(ggufs) > 6 else "")
            raise InputError(f"model: {repo} holds {len(ggufs)} GGUF files and no safetensors: name one, "
                             f"--model {repo}/<file>.gguf ({shown})")
        file = ggufs[0]
    if file not in ggufs:
        raise InputError(f"model: {repo} has no file {file!r}")
    head = r.client.get(r.url(file), 0, file, head=True)
    size_text = head.headers.get("x-linked-size") or head.headers.get("content-length") or ""
    size = int(size_text) if size_text.strip().isdigit() and len(size_text.strip()) < 20 else 0
    if size <= 0:
        raise InputError(f"model: the Hub gave no size for {repo}/{file}")
    if size > GGUF_FILE_MAX:
        raise InputError(f"model: the Hub gives {repo}/{file} a size of {size:,} bytes: larger than any model file")
    want = GGUF_HEADER_START
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / Path(file).name
        while True:
            got = _range(r, file, 0, min(want, size) - 1)
            with open(local, "wb") as fh:            # the header, then a hole to the file's real size
                fh.write(got)
                fh.truncate(size)
            try:
                prof = checkpoints.profile_from_gguf(str(local))
                break
            except InputError as exc:
                if want >= min(size, GGUF_HEADER_MAX):
                    raise InputError(f"model: {repo}/{file}: {str(exc).removeprefix('model: ')}") from None
                want *= 4
    ckpt = dataclasses.replace(prof.checkpoint, path=f"hf://{repo}@{r.sha}/{file}")
    return dataclasses.replace(prof, checkpoint=ckpt, hf_repo=repo,
                               source=f"{prof.source}; Hub {repo}@{r.sha}/{file}, header read by range")
