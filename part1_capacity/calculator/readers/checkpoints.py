"""Local checkpoints as ``--model``: a Hugging Face model folder or a GGUF file, weight bytes read from headers.

- A Hugging Face snapshot folder: ``config.json`` (read by ``configs``) and the weights as ``*.safetensors``,
  sharded ones listed in ``model.safetensors.index.json``. Every tensor's dtype and shape come from the
  safetensors headers through the ``safetensors`` library (``safe_open(...).get_slice(name)``: the header only,
  never the data), so the bytes are exact whatever the mix — FP8 matrices with bf16 norms and fp32 block scales
  (DeepSeek-V3), MXFP4 expert blocks stored as U8 beside bf16 attention (gpt-oss).
  What a server loads: vLLM skips the multi-token-prediction layers (``model.layers.{i}`` for
  ``i >= num_hidden_layers`` when ``num_nextn_predict_layers > 0``) unless MTP speculative decoding is on
  (``vllm/model_executor/models/deepseek_v2.py``, ``get_spec_layer_idx_from_weight_name`` in ``load_weights``).
- A GGUF file: architecture, layer kinds and sizes from its metadata, exact bytes and element counts from its
  tensor table, through the ``gguf`` package (``GGUFReader`` maps the file; no tensor data is read). Which layer
  is which follows llama.cpp (``src/models/<arch>.cpp``, ``llama-hparams.cpp``): sliding-window layers from
  ``<arch>.attention.sliding_window_pattern`` or the architecture's period (gemma2 2, gemma3 6, gpt-oss 2: layer
  ``i`` slides when ``i % n < n − 1``, every layer when ``n`` is 0, ``set_swa_pattern``); recurrent layers —
  nemotron_h: ``head_count_kv`` and ``feed_forward_length`` both 0; jamba: ``head_count_kv`` 0; qwen3next: all but
  every ``full_attention_interval``-th (default 4); MLA (deepseek2): ``attention.kv_lora_rank`` and
  ``attention.key_length_mla``, the cached RoPE key ``rope.dimension_count`` wide.

``safetensors`` and ``gguf`` are imported only here, only when such a path is given.
"""
from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

from part1_capacity.calculator.readers import gguf_header
from part1_capacity.calculator.base import validate
from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.model.weights import GGUF, SAFETENSORS, Checkpoint
from course.shared.units import ceil_div

# Bits per element of every safetensors dtype (safetensors' Dtype enum; F4/F6 are packed sub-byte floats).
SAFETENSORS_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
                    "F8_E5M2FNUZ": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16,
                    "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}
INDEX = "model.safetensors.index.json"
_SHARD = re.compile(r"^(.*)-(\d{5})-of-(\d{5})\.safetensors$")    # transformers' shard names (save_pretrained)
_LAYER = re.compile(r"^(?:model\.)?layers\.(\d+)\.")


# --- Hugging Face folders -----------------------------------------------------------------------------------------
def is_model_folder(path) -> bool:
    p = Path(path)
    return p.is_dir() and ((p / INDEX).is_file() or any(p.glob("*.safetensors")))


def safetensors_files(folder: Path) -> list[Path]:
    """The shards: those the index names (each must be present), else every ``*.safetensors`` in the folder — a
    set named ``-0000k-of-0000N`` only when all N are there; no file counted twice (a symlink to another shard)."""
    return _folder_shards(folder)[0]


def _folder_shards(folder: Path) -> tuple[list[Path], dict | None]:
    """(the shard files, the index's weight_map or None)."""
    index = folder / INDEX
    if index.is_file():
        d = validate.load_json_object(index, "model", max_bytes=64 * validate.MIB)
        wm = d.get("weight_map")
        names = index_shards(wm, index.name)
        for n in names:
            if not (folder / n).is_file():
                raise InputError(f"model: {validate.printable(str(folder / n))} is missing (named in {index.name}); "
                                 f"download every shard")
        files = [folder / n for n in names]
        whole_sets(files, f"{index.name} names")
        return _distinct(files), wm
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise InputError(f"model: folder {validate.printable(str(folder))} has no *.safetensors and no {INDEX}")
    whole_sets(files, "the folder holds")
    return _distinct(files), None


def index_shards(wm, name: str) -> list[str]:
    """The shard file names an index's ``weight_map`` names (each a plain file name, at most 255 bytes)."""
    if not isinstance(wm, dict) or not wm:
        raise InputError(f"model: {name} has no 'weight_map' object naming the shards")
    bad = next((v for v in wm.values() if not isinstance(v, str)), None)
    if bad is not None:     # a list or a number where a shard's file name belongs
        raise InputError(f"model: {name}: 'weight_map' values must be shard file names, got {validate.show(bad)}")
    names = sorted(set(wm.values()))
    for n in names:
        if "/" in n or "\\" in n or n in ("", ".", "..") or len(n.encode("utf-8", "replace")) > 255 \
                or not n.isprintable():
            raise InputError(f"model: {name}: shard name {validate.show(n)} is not a file name "
                             f"(one name in the folder, at most 255 bytes)")
    return names


def whole_sets(files, holds: str) -> None:
    """Every set of shards named ``<name>-0000k-of-0000N.safetensors`` complete: all N, one N per set."""
    sets: dict[str, set] = {}
    for f in files:
        m = _SHARD.match(f.name)
        if m:
            sets.setdefault(m.group(1), set()).add((int(m.group(2)), int(m.group(3))))
    for stem, parts in sets.items():
        counts = {n for _, n in parts}
        if len(counts) > 1:
            raise InputError(f"model: {holds} shards of {validate.printable(stem)} out of different totals "
                             f"({', '.join(str(n) for n in sorted(counts))}): one checkpoint is sharded one way")
        n = counts.pop()
        missing = sorted(set(range(1, n + 1)) - {k for k, _ in parts})
        if missing or any(k > n or k < 1 for k, _ in parts):
            first = missing[0] if missing else next(k for k, _ in parts if k > n or k < 1)
            raise InputError(f"model: {holds} {len(parts)} of the {n} shards of {validate.printable(stem)} "
                             f"(no {validate.printable(stem)}-{first:05d}-of-{n:05d}.safetensors): a checkpoint is "
                             f"counted only whole; download every shard")


def _distinct(files: list[Path]) -> list[Path]:
    """``files``, refused when two are the same file (a symlink or hard link to another shard): each is counted
    once, as the GGUF reader checks its parts."""
    seen: list[Path] = []
    for f in files:
        for g in seen:
            try:
                same = f.resolve() == g.resolve() or f.samefile(g)
            except OSError:
                same = False
            if same:
                raise InputError(f"model: {validate.printable(f.name)} is the same file as "
                                 f"{validate.printable(g.name)}: every shard is counted once, so each must be its "
                                 f"own file")
        seen.append(f)
    return files


def check_tensors_whole(tensors_by_file: dict, weight_map: dict | None, where: str = "model") -> None:
    """No tensor counted twice (the same name in two files: the folder holds those weights twice), and every tensor
    the index maps present in the shard it names."""
    owner: dict[str, str] = {}
    for fname, names in tensors_by_file.items():
        for n in names:
            if n in owner:
                raise InputError(f"{where}: tensor {validate.show(n)} is in both {validate.printable(owner[n])} and "
                                 f"{validate.printable(fname)}: the weights would be counted twice; keep one copy "
                                 f"of the checkpoint")
            owner[n] = fname
    for n, fname in (weight_map or {}).items():
        if owner.get(n) != fname:
            raise InputError(f"{where}: the index maps tensor {validate.show(n)} to {validate.printable(fname)}, "
                             f"which does not hold it: the shards are not those of this index")


def tensor_bytes(dtype: str, shape, where: str) -> int:
    """Bytes of one tensor: elements × bits of its dtype (sub-byte types packed)."""
    if dtype not in SAFETENSORS_BITS:
        raise InputError(f"{where}: tensor dtype '{dtype}' is not known; known: {', '.join(SAFETENSORS_BITS)}")
    n = math.prod(int(s) for s in shape)
    return ceil_div(n * SAFETENSORS_BITS[dtype], 8)


def checkpoint_from_tensors(tensors, n_layers: int, n_mtp: int, path: str, where: str = "model") -> Checkpoint:
    """Exact bytes of (name, safetensors dtype, shape) tensors — a folder's headers or a Hub repository's; layers
    ``>= n_layers`` count only in ``file_bytes`` when the model has ``n_mtp`` MTP layers (vLLM skips them)."""
    loaded = total = count = 0
    by_type: dict[str, int] = {}
    for name, dtype, shape in tensors:
        b = tensor_bytes(dtype, shape, f"{where}: tensor '{name}'")
        m = _LAYER.match(name)
        spec = n_mtp > 0 and m is not None and n_layers <= int(m.group(1)) < n_layers + n_mtp
        total += b
        count += 1
        if not spec:
            loaded += b
            by_type[dtype] = by_type.get(dtype, 0) + b
    return Checkpoint(SAFETENSORS, float(loaded), float(total), by_type, count, path)


def safetensors_tensors(files, weight_map: dict | None = None) -> list[tuple[str, str, tuple]]:
    """(name, dtype, shape) of every tensor in ``files``, from their headers (``safe_open``: no data read); refused
    when a tensor is in two files or the index ``weight_map`` maps one to a file without it."""
    from safetensors import SafetensorError, safe_open

    out, by_file = [], {}
    for f in files:
        by_file[Path(f).name] = names = []
        validate.regular_file(f, "model")           # a FIFO named *.safetensors must not block the open
        try:
            with safe_open(str(f), framework="numpy") as h:
                for name in h.keys():
                    sl = h.get_slice(name)
                    out.append((name, sl.get_dtype(), tuple(sl.get_shape())))
                    names.append(name)
        except (SafetensorError, OSError, ValueError) as exc:
            msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:240]
            raise InputError(f"model: {f.name} is not a readable safetensors file ({msg})") from None
    check_tensors_whole(by_file, weight_map)
    return out


def read_safetensors(files, n_layers: int, n_mtp: int = 0) -> Checkpoint:
    """Exact bytes of the tensors in ``files``, from their headers (see ``checkpoint_from_tensors``)."""
    return checkpoint_from_tensors(safetensors_tensors(files), n_layers, n_mtp, str(Path(files[0]).parent))


def profile_from_folder(path):
    """A Hugging Face model folder: the profile of its config.json, weight bytes from its safetensors headers."""
    from part1_capacity.calculator.model.configs import load_config

    from part1_capacity.calculator.model.configs import profile_from_config

    folder = Path(path)
    d, where = load_config(folder)
    text = d.get("text_config") if isinstance(d.get("text_config"), dict) else d
    n_mtp = text.get("num_nextn_predict_layers") or 0 if isinstance(text, dict) else 0
    n_mtp = validate.number(n_mtp, "model: config.json: field 'num_nextn_predict_layers'", lo=0, hi=16, integer=True)
    tensors = safetensors_tensors(*_folder_shards(folder))
    quantized = isinstance(d, dict) and bool(d.get("quantization_config") or (text or {}).get("quantization_config"))
    # an unquantized checkpoint's headers are its parameters: exact, and no model needs building
    params = None if quantized else [(n, s) for n, _, s in tensors]
    prof = profile_from_config(d, where, model_id=folder.resolve().name, parameters=params)
    ckpt = checkpoint_from_tensors(tensors, prof.n_layers, n_mtp, str(folder))
    return dataclasses.replace(prof, checkpoint=ckpt, source=f"{prof.source}; weights from {ckpt.n_tensors} "
                                                            f"safetensors headers")


# --- GGUF -----------------------------------------------------------------------------------------------------------
FULL_ATTENTION = ("llama", "mistral", "qwen2", "qwen3", "granite", "olmo2", "phi3", "stablelm")
SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "gpt-oss": 2}
MLA = ("deepseek2",)
RECURRENT = ("nemotron_h", "jamba", "qwen3next")
GGUF_ARCHITECTURES = FULL_ATTENTION + tuple(SWA_PERIOD) + MLA + RECURRENT
# The file's type (general.file_type, llama.cpp's LLAMA_FTYPE) → the calculator's name for that precision.
_FILE_TYPES = {0: "fp32", 1: "fp16", 7: "q8_0", 8: "q5_0", 15: "q4_k_m", 32: "bf16", 38: "mxfp4"}


def gguf_field(reader, key):
    """A metadata value: a string, a number, or a list (per-layer values)."""
    f = reader.fields.get(key)
    if f is None:
        return None
    if f.types and f.types[0].name == "STRING":
        return bytes(f.parts[f.data[0]]).decode("utf-8", errors="replace")
    if len(f.types) > 1 and f.types[0].name == "ARRAY" and f.types[1].name == "STRING":
        # an array of strings: the strings, never their bytes read as numbers (callers refuse non-numbers)
        return [bytes(f.parts[i]).decode("utf-8", errors="replace") for i in f.data]
    vals = [f.parts[i].tolist() for i in f.data]
    vals = [v[0] if isinstance(v, list) and len(v) == 1 else v for v in vals]
    return vals[0] if len(vals) == 1 else vals


def _open_gguf(path, field: str):
    """The ``gguf`` package's reader, once ``gguf_header.scan`` has bounded what the header claims."""
    return gguf_header.open_reader(validate.regular_file(path, field), field)


_SPLIT = re.compile(r"^(.*)-(\d{5})-of-(\d{5})\.gguf$")


def _other_parts(path: Path, reader, field: str) -> list:
    """Readers of the other files of a split GGUF (``name-00001-of-00003.gguf``, llama.cpp's gguf-split naming,
    ``split.count`` in the metadata); the first part must be the one given, and every part present."""
    count = gguf_field(reader, "split.count")
    if not count or count == 1:
        return []
    count = validate.number(count, f"{field}: GGUF field 'split.count'", lo=1, hi=1000, integer=True)
    m = _SPLIT.match(path.name)
    if not m or int(m.group(2)) != 1:
        raise InputError(f"{field}: {path.name} is one part of a split GGUF ({count} parts): pass the first part, "
                         f"named like model-00001-of-{count:05d}.gguf")
    parts = [path.with_name(f"{m.group(1)}-{i:05d}-of-{count:05d}.gguf") for i in range(2, count + 1)]
    seen = [path.resolve()]
    for p in parts:
        if not p.is_file():
            raise InputError(f"{field}: {p} is missing (part of a split GGUF of {count}); download every part")
        if any(p.resolve() == q or p.samefile(q) for q in seen):
            raise InputError(f"{field}: {p.name} is the same file as another part of the split GGUF: every part "
                             "is counted once, so each must be its own file")
        seen.append(p.resolve())
    return [_open_gguf(p, field) for p in parts]


def gguf_profile_dict(path, field: str = "model", reader=None) -> dict:
    """Profile fields (the bundled table's format, ``profiles.profile_from_dict``) from a GGUF's metadata."""
    path = Path(path)
    r = reader or _open_gguf(path, field)
    others = _other_parts(path, r, field)
    arch = gguf_field(r, "general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise InputError(f"{field}: GGUF architecture {validate.show(arch)} is not supported; supported: "
                         f"{', '.join(GGUF_ARCHITECTURES)}")

    def f(key, default=None, lo=0, hi=2 ** 31, scalar=False):
        v = gguf_field(r, f"{arch}.{key}")
        if v is None:
            if default is None:
                raise InputError(f"{field}: {path.name}: missing GGUF field '{arch}.{key}'")
            return default
        if isinstance(v, list) and scalar:
            raise InputError(f"{field}: GGUF field '{arch}.{key}' must be one number, got a list of {len(v)}")
        if isinstance(v, list):
            return [validate.number(x, f"{field}: GGUF field '{arch}.{key}'", lo=lo, hi=hi, integer=True) for x in v]
        return validate.number(v, f"{field}: GGUF field '{arch}.{key}'", lo=lo, hi=hi, integer=True)

    n = f("block_count", lo=1, hi=512, scalar=True)
    d = f("embedding_length", lo=1, hi=65536, scalar=True)

    def per_layer(v):
        out = list(v) if isinstance(v, list) else [v] * n
        if len(out) != n:
            raise InputError(f"{field}: {path.name}: a per-layer field has {len(out)} values for {n} layers")
        return out

    heads = per_layer(f("attention.head_count", hi=4096))
    kv = per_layer(f("attention.head_count_kv", heads, hi=4096))
    ff = per_layer(f("feed_forward_length", 0))
    n_heads = max(heads)
    if n_heads < 1:
        raise InputError(f"{field}: {path.name}: attention.head_count must be >= 1")
    if max(kv) < 1:
        raise InputError(f"{field}: {path.name}: attention.head_count_kv must be >= 1 on at least one layer "
                         "(0 marks a layer without attention)")
    out = {"id": f"gguf:{path.stem}", "name": validate.printable(gguf_field(r, "general.name") or path.stem), "_architecture": arch,
           "n_layers": n, "n_heads": n_heads, "n_kv_heads": max(kv),
           "head_dim": f("attention.key_length", d // n_heads, lo=1), "hidden_size": d,
           "max_context": f("context_length", lo=1), "source": f"read from the GGUF's metadata ({arch})"}
    if arch in SWA_PERIOD:
        pattern = f("attention.sliding_window_pattern", SWA_PERIOD[arch], lo=0, hi=512)
        # llama-hparams.cpp set_swa_pattern: a pattern of 0 makes every layer slide
        swa = ([bool(x) for x in pattern] if isinstance(pattern, list)
               else [pattern == 0 or i % pattern < pattern - 1 for i in range(n)])
        out.update(n_window_layers=sum(swa), window=f("attention.sliding_window", lo=1), n_full_layers=n - sum(swa))
    elif arch in MLA:
        if None in (gguf_field(r, f"{arch}.attention.kv_lora_rank"), gguf_field(r, f"{arch}.attention.key_length_mla")):
            raise InputError(f"{field}: a deepseek2 GGUF without attention.key_length_mla caches decompressed K/V "
                             "(an old conversion); convert it again with a current llama.cpp")
        out.update(n_kv_heads=n_heads, kv_lora_rank=f("attention.kv_lora_rank", lo=1),
                   qk_rope_head_dim=f("rope.dimension_count", lo=1), head_dim=f("attention.key_length_mla", lo=1),
                   n_full_layers=n)
    elif arch in RECURRENT:
        if arch == "nemotron_h":
            recr = [kv[i] == 0 and ff[i] == 0 for i in range(n)]
            attn = [kv[i] > 0 and ff[i] == 0 for i in range(n)]
        elif arch == "jamba":
            recr = [kv[i] == 0 for i in range(n)]
            attn = [not x for x in recr]
        else:
            every = f("full_attention_interval", 4, lo=1, hi=512)
            recr = [(i + 1) % every != 0 for i in range(n)]
            attn = [not x for x in recr]
        d_conv, d_inner, d_state = f("ssm.conv_kernel", lo=1), f("ssm.inner_size", lo=1), f("ssm.state_size", lo=1)
        rank, groups = f("ssm.time_step_rank", lo=1), f("ssm.group_count", 0)
        if arch == "nemotron_h":
            ssm = {"kind": "mamba2", "n_heads": rank, "head_dim": d_inner // rank, "d_state": d_state,
                   "d_conv": d_conv, "n_groups": groups}
        elif arch == "jamba":
            ssm = {"kind": "mamba1", "d_inner": d_inner, "d_state": d_state, "d_conv": d_conv}
        else:
            ssm = {"kind": "gated_deltanet", "n_k_heads": groups, "n_v_heads": rank, "k_head_dim": d_state,
                   "v_head_dim": d_state, "d_conv": d_conv}
        out.update(n_full_layers=sum(attn), ssm={**ssm, "n_layers": sum(recr)})
    else:
        out.update(n_full_layers=n)
    if n_heads % out["n_kv_heads"]:
        out["n_kv_heads"] = n_heads

    # parameters and exact bytes from the tensor table (of every part of a split GGUF); routed experts
    # (`*_exps`) count k/n toward active
    total = experts = loaded = 0
    by_type: dict[str, int] = {}
    tensors = [t for part in [r, *others] for t in part.tensors]
    for t in tensors:
        n_el, n_b = int(t.n_elements), int(t.n_bytes)
        total += n_el
        experts += n_el if "_exps" in t.name else 0
        loaded += n_b
        by_type[t.tensor_type.name] = by_type.get(t.tensor_type.name, 0) + n_b
    n_exp = f("expert_count", 0)
    k = f("expert_used_count", 0)
    active = total - experts * (1 - min(k, n_exp) / n_exp) if n_exp and experts else total
    ftype = gguf_field(r, "general.file_type")
    out.update(params_total=float(total), params_active=float(active),
               native_dtype=_FILE_TYPES.get(ftype if isinstance(ftype, int) else -1, "fp32"))
    out["_checkpoint"] = Checkpoint(GGUF, float(loaded), float(loaded), by_type, len(tensors), str(path))
    return out


def profile_from_gguf(path, field: str = "model"):
    """The calculator's profile of a GGUF file, exact weight bytes included."""
    from part1_capacity.calculator.model.profiles import profile_from_dict

    d = gguf_profile_dict(path, field)
    ckpt = d.pop("_checkpoint")
    return dataclasses.replace(profile_from_dict(d, where="gguf"), checkpoint=ckpt)
