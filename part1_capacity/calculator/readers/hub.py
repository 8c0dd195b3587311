"""A Hugging Face Hub repository id as ``--model`` (``org/name``, ``org/name@revision``): read over HTTP, never the weights.

Through ``huggingface_hub``, as every Hugging Face tool does: the repository's file list (``model_info``), its
``config.json`` (``hf_hub_download``: the Hub cache), and the header of every safetensors file —
``model.safetensors`` or the shards ``model.safetensors.index.json`` names — by HTTP range requests
(``get_safetensors_metadata``: the first bytes of each file, the 8-byte length and the JSON header, never the
tensors). The bytes are exact (``weights_bytes_source: "safetensors"``); an unquantized checkpoint's headers give
the exact parameters too, so no model is built. A repository with GGUF files and no safetensors: the GGUF header
is read by range into a sparse file of the real size and parsed like a local GGUF.

``HF_ENDPOINT``, ``HF_TOKEN``, ``HF_HUB_OFFLINE``, ``HF_HOME``/``HF_HUB_CACHE`` and the timeouts
(``HF_HUB_ETAG_TIMEOUT``, ``HF_HUB_DOWNLOAD_TIMEOUT``) are read when a repository is asked for, as
``huggingface_hub`` reads them. Offline, the cached ``config.json`` is used and the weights are parameters × dtype.
A missing or gated repository, an unknown revision, a repository with nothing to read, a timeout or no network:
one line (``InputError``, exit 2).
"""
from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path

from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError

# the Hub's rule for a repository id: an owner and a name, letters, digits, '-', '_', '.', at most 96 each
REPO_ID = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
GGUF_HEADER_START = 1 << 20          # bytes of a GGUF read first; doubled until its header parses
GGUF_HEADER_MAX = 256 << 20


def split(name: str) -> tuple[str, str | None, str | None]:
    """``org/name[/file.gguf][@revision]`` → (repo id, file or None, revision or None)."""
    rev = None
    if "@" in name:
        name, rev = name.rsplit("@", 1)
    parts = name.split("/")
    file = "/".join(parts[2:]) or None
    return "/".join(parts[:2]), file, rev


def looks_like_repo(name: str) -> bool:
    """``org/name`` (optionally ``/file.gguf`` and ``@revision``) that is not a local path."""
    if Path(name).exists() or name.startswith((".", "/", "~")):
        return False
    repo, file, rev = split(name)
    if repo.lower().endswith((".json", ".gguf", ".safetensors", ".bin")):
        return False                       # a file's path (missing), not a repository
    return bool(REPO_ID.match(repo)) and (file is None or file.endswith(".gguf")) and (
        rev is None or re.fullmatch(r"[\w./-]{1,255}", rev) is not None)


def _env() -> dict:
    """The Hugging Face settings as they stand now (the environment, else huggingface_hub's defaults)."""
    from huggingface_hub import constants

    def flag(name, default):
        v = os.environ.get(name)
        return default if v is None else v.strip().upper() in ("1", "ON", "YES", "TRUE")

    def seconds(name, default):
        try:
            return float(os.environ.get(name, default))
        except ValueError:
            raise InputError(f"{name}: must be a number of seconds, got {os.environ[name]!r}") from None

    return {"endpoint": (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/"),
            "token": os.environ.get("HF_TOKEN") or None,
            "offline": flag("HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE),
            "cache_dir": os.environ.get("HF_HUB_CACHE") or (os.path.join(os.environ["HF_HOME"], "hub")
                                                            if os.environ.get("HF_HOME") else None),
            "timeout": seconds("HF_HUB_ETAG_TIMEOUT", constants.HF_HUB_ETAG_TIMEOUT),
            "download_timeout": seconds("HF_HUB_DOWNLOAD_TIMEOUT", constants.HF_HUB_DOWNLOAD_TIMEOUT)}


@contextmanager
def _offline_as_now(offline: bool):
    """huggingface_hub reads HF_HUB_OFFLINE once, at its import; a process that imported it under another
    setting (transformers imports it too) follows the setting as it stands now, for this read."""
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = offline
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


@contextmanager
def _one_line(repo: str, rev: str | None, env: dict):
    """Every failure of a Hub request as one ``InputError`` line naming the repository and what to do."""
    from huggingface_hub import errors

    at = f"{repo}@{rev}" if rev else repo
    try:
        yield
    except InputError:
        raise
    except errors.GatedRepoError:
        raise InputError(f"model: {at} is gated: accept its terms on the Hub and set HF_TOKEN to a token that "
                         f"may read it") from None
    except errors.RevisionNotFoundError:
        raise InputError(f"model: {repo} has no revision {rev!r} (--revision: a branch, tag or commit)") from None
    except errors.RepositoryNotFoundError:
        raise InputError(f"model: no Hub repository {repo} at {env['endpoint']} (or it is private and HF_TOKEN "
                         f"does not grant it); a local path must exist") from None
    except (errors.OfflineModeIsEnabled, errors.LocalEntryNotFoundError) as exc:
        if env["offline"]:
            raise InputError(f"model: HF_HUB_OFFLINE is set and {at} is not in the Hub cache") from None
        raise InputError(f"model: cannot reach the Hub at {env['endpoint']} for {at} "
                         f"({_first_line(exc)}): check the network or HF_ENDPOINT") from None
    except errors.EntryNotFoundError as exc:
        raise InputError(f"model: {at}: {_first_line(exc)}") from None
    except errors.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        raise InputError(f"model: the Hub at {env['endpoint']} answered {status or 'an error'} for {at}: "
                         f"{_first_line(exc)}") from None
    except (OSError, ValueError) as exc:     # timeouts, refused connections, bad answers (httpx errors are OSError
        raise InputError(f"model: cannot read {at} from the Hub at {env['endpoint']} ({_first_line(exc)}): "
                         f"check the network or HF_ENDPOINT") from None
    except Exception as exc:                 # httpx's transport errors are not OSError subclasses
        if type(exc).__module__.startswith(("httpx", "httpcore", "requests", "urllib3")):
            raise InputError(f"model: cannot reach the Hub at {env['endpoint']} for {at} ({type(exc).__name__}: "
                             f"{_first_line(exc)}): check the network or HF_ENDPOINT") from None
        raise


def _first_line(exc) -> str:
    return validate.printable((str(exc).strip().splitlines() or [type(exc).__name__])[0][:200])


def profile_from_hub(name: str):
    """The calculator's profile of a Hub repository (``org/name``, ``org/name@rev``, ``org/name/file.gguf``)."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()                  # a plan's output is the plan: no download bars on stderr
    repo, file, rev = split(name)
    env = _env()
    api = HfApi(endpoint=env["endpoint"], token=env["token"])
    with _one_line(repo, rev, env), _offline_as_now(env["offline"]):
        if env["offline"]:
            path = hf_hub_download(repo, "config.json", revision=rev, cache_dir=env["cache_dir"],
                                   local_files_only=True)
            return _from_config(path, repo, rev or "cached", None)
        info = api.model_info(repo, revision=rev, timeout=env["timeout"])
        sha = info.sha or rev
        files = sorted(s.rfilename for s in (info.siblings or []))
        ggufs = [f for f in files if f.endswith(".gguf")]
        if file is not None or ("config.json" not in files and ggufs):
            return _from_gguf(api, repo, sha, file, ggufs, env)
        if "config.json" not in files:
            raise InputError(f"model: {repo} has no config.json and no .gguf file: nothing the calculator reads")
        # by the name asked for (main, a tag): the Hub cache records that name, so an offline run finds it
        path = hf_hub_download(repo, "config.json", revision=rev, endpoint=env["endpoint"], token=env["token"],
                               cache_dir=env["cache_dir"], etag_timeout=env["timeout"])
        meta = None
        if "model.safetensors" in files or "model.safetensors.index.json" in files:
            meta = api.get_safetensors_metadata(repo, revision=sha, timeout=env["download_timeout"])
        return _from_config(path, repo, sha, meta)


def _from_config(path, repo: str, sha: str, meta):
    from part1_capacity.calculator.readers import checkpoints
    from part1_capacity.calculator.model import configs

    d = validate.load_json_object(Path(path), "model", max_bytes=4 * validate.MIB, infinity=True)
    where = f"{repo}/config.json"
    if meta is None:
        prof = configs.profile_from_config(d, where, model_id=repo)
        return dataclasses.replace(prof, hf_repo=repo, source=f"{prof.source}; Hub {repo}@{sha} (no safetensors: "
                                                              f"weights as parameters × dtype)")
    tensors = [(name, t.dtype, tuple(t.shape)) for fm in meta.files_metadata.values()
               for name, t in fm.tensors.items()]
    if len(tensors) > 1_000_000:
        raise InputError(f"model: {repo} lists {len(tensors)} tensors: more than any published checkpoint")
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


def _from_gguf(api, repo: str, sha: str, file, ggufs: list, env: dict):
    """A GGUF of the repository: its header read by HTTP range into a sparse local file of the real size."""
    import httpx
    from huggingface_hub import hf_hub_url

    from part1_capacity.calculator.readers import checkpoints

    if file is None:
        if len(ggufs) != 1:
            shown = ", ".join(ggufs[:6]) + (", …" if len(ggufs) > 6 else "")
            raise InputError(f"model: {repo} holds {len(ggufs)} GGUF files and no safetensors: name one, "
                             f"--model {repo}/<file>.gguf ({shown})")
        file = ggufs[0]
    if file not in ggufs:
        raise InputError(f"model: {repo} has no file {file!r}")
    url = hf_hub_url(repo, file, revision=sha, endpoint=env["endpoint"])
    headers = {"Authorization": f"Bearer {env['token']}"} if env["token"] else {}
    with httpx.Client(timeout=env["download_timeout"], follow_redirects=True, headers=headers) as http:
        head = http.head(url)
        head.raise_for_status()
        size = int(head.headers.get("x-linked-size") or head.headers.get("content-length") or 0)
        if size <= 0:
            raise InputError(f"model: the Hub gave no size for {repo}/{file}")
        want = GGUF_HEADER_START
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / Path(file).name
            while True:
                got = http.get(url, headers={"Range": f"bytes=0-{min(want, size) - 1}"})
                got.raise_for_status()
                with open(local, "wb") as fh:            # the header, then a hole to the file's real size
                    fh.write(got.content[:min(want, size)])
                    fh.truncate(size)
                try:
                    prof = checkpoints.profile_from_gguf(str(local))
                    break
                except InputError as exc:
                    if want >= min(size, GGUF_HEADER_MAX):
                        raise InputError(f"model: {repo}/{file}: {str(exc).removeprefix('model: ')}") from None
                    want *= 4
    ckpt = dataclasses.replace(prof.checkpoint, path=f"hf://{repo}@{sha}/{file}")
    return dataclasses.replace(prof, checkpoint=ckpt, hf_repo=repo,
                               source=f"{prof.source}; Hub {repo}@{sha}/{file}, header read by range")
