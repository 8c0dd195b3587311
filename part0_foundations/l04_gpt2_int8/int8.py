"""Lesson 04 — GPT-2 to INT8: Conv1D → nn.Linear, symmetric INT8 per tensor and per output channel.

The regions between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` are what learners write in the exercise
notebook (tools/make_notebooks.py copies these functions into it; nbgrader blanks the regions). This file is the
one place the solution is written.

Symmetric INT8: a real weight ``w`` is stored as an integer ``q`` in [-128, 127] and a float ``scale`` with
``w ≈ q · scale`` (zero point 0, so 0.0 is exactly representable). The default scale maps the largest magnitude to
127: ``scale = max|w| / 127``. Rounding is half to even (``torch.round``), as ``torch.quantize_per_tensor`` does.
"""
from __future__ import annotations

import copy
import io
import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from transformers.pytorch_utils import Conv1D

QMIN = -128  # the INT8 range
QMAX = 127
# An all-zero tensor (or row) would get scale 0 and divide by zero; any positive scale stores it exactly as 0.
MIN_MAX_ABS = 1e-12


def conv1d_to_linear(model: nn.Module) -> nn.Module:
    """Replace every ``transformers`` ``Conv1D`` inside ``model`` by an equivalent ``nn.Linear``, in place.

    ``Conv1D(nf, nx)`` computes ``x @ W + b`` with ``W`` of shape (nx, nf) = (in, out); ``nn.Linear(nx, nf)``
    computes ``x @ Wᵀ + b`` with ``W`` of shape (out, in): the new weight is the transpose. Every other module
    (the embeddings, the tied ``lm_head``) is left exactly as it is. Returns ``model``.
    """
    ### BEGIN SOLUTION
    for name, child in list(model.named_children()):
        if isinstance(child, Conv1D):
            nx, nf = child.weight.shape
            linear = nn.Linear(nx, nf, bias=child.bias is not None, dtype=child.weight.dtype, device=child.weight.device)
            with torch.no_grad():
                linear.weight.copy_(child.weight.t())
                if child.bias is not None:
                    linear.bias.copy_(child.bias)
            setattr(model, name, linear)
        else:
            conv1d_to_linear(child)
    ### END SOLUTION
    return model


def quantize_per_tensor(w: torch.Tensor, scale=None):
    """Symmetric INT8 with one scale for the whole tensor.

    ``scale`` defaults to ``max|w| / 127``. Returns ``(q, scale)``: ``q`` int8 of ``w``'s shape with
    ``q = clamp(round(w / scale), -128, 127)``, ``scale`` a 0-dim float32 tensor.
    """
    ### BEGIN SOLUTION
    w = w.detach().float()
    if scale is None:
        scale = w.abs().max().clamp(min=MIN_MAX_ABS) / QMAX
    scale = torch.as_tensor(scale, dtype=torch.float32)
    q = torch.clamp(torch.round(w / scale), QMIN, QMAX).to(torch.int8)
    ### END SOLUTION
    return q, scale


def quantize_per_channel(w: torch.Tensor, axis: int = 0, scales=None):
    """Symmetric INT8 with one scale per channel along ``axis`` (axis 0 of an ``nn.Linear`` weight = output channels).

    ``scales`` defaults to ``max|w|`` over every other axis, divided by 127. Returns ``(q, scales)``: ``q`` int8 of
    ``w``'s shape, ``scales`` float32 of shape ``(w.shape[axis],)``.
    """
    ### BEGIN SOLUTION
    w = w.detach().float()
    axis = axis % w.dim()
    if scales is None:
        other = [d for d in range(w.dim()) if d != axis]
        max_abs = w.abs().amax(dim=other) if other else w.abs()
        scales = max_abs.clamp(min=MIN_MAX_ABS) / QMAX
    scales = torch.as_tensor(scales, dtype=torch.float32)
    shape = [1] * w.dim()
    shape[axis] = -1
    q = torch.clamp(torch.round(w / scales.view(shape)), QMIN, QMAX).to(torch.int8)
    ### END SOLUTION
    return q, scales


def dequantize(q: torch.Tensor, scale, axis: int = 0) -> torch.Tensor:
    """Back to float32: ``q · scale``; a 1-D ``scale`` holds one value per channel along ``axis``."""
    ### BEGIN SOLUTION
    scale = torch.as_tensor(scale, dtype=torch.float32)
    if scale.dim() > 0:
        shape = [1] * q.dim()
        shape[axis % q.dim()] = -1
        scale = scale.view(shape)
    w = q.float() * scale
    ### END SOLUTION
    return w


def int8_round_trip(linear: nn.Linear) -> nn.Linear:
    """A copy of ``linear`` whose weight is replaced by its INT8 round trip with one scale per output channel,
    ``dequantize(*quantize_per_channel(W, axis=0))``: what a real layer loses to per-channel INT8, kept in float32
    so the model runs unchanged. The bias and the original layer are left as they are."""
    ### BEGIN SOLUTION
    out = copy.deepcopy(linear)
    q, scales = quantize_per_channel(linear.weight, axis=0)
    with torch.no_grad():
        out.weight.copy_(dequantize(q, scales, axis=0))
    ### END SOLUTION
    return out


# ---------------------------------------------------------------------------------------------------------------
# Given code: the hand-written quantizer applied to a whole model, the library route, and the measurements.
# ---------------------------------------------------------------------------------------------------------------
SCHEMES = ("per_tensor", "per_channel")


def _check_scheme(scheme):
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: {scheme!r} is not one of {', '.join(SCHEMES)}")


class Int8Linear(nn.Module):
    """A weight-only INT8 ``nn.Linear``: stores the int8 weight and float32 scale(s), computes in float32.

    This is the hand-written quantizer made storable: the state holds 1 byte per weight (plus the scales), and
    ``forward`` dequantizes before an ordinary float32 matmul. Without int8 kernels it is not faster — it is smaller.
    """

    def __init__(self, linear: nn.Linear, scheme: str):
        super().__init__()
        _check_scheme(scheme)
        self.in_features, self.out_features, self.scheme = linear.in_features, linear.out_features, scheme
        q, s = quantize_per_channel(linear.weight, axis=0) if scheme == "per_channel" else quantize_per_tensor(linear.weight)
        self.register_buffer("qweight", q)
        self.register_buffer("scale", s)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())

    def dequantized_weight(self) -> torch.Tensor:
        return dequantize(self.qweight, self.scale, axis=0)

    def forward(self, x):
        return F.linear(x, self.dequantized_weight(), self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, scheme={self.scheme}"


def is_tied(model) -> bool:
    """True when ``lm_head`` reads the very same weight tensor as the input embedding ``wte``."""
    head = getattr(model.lm_head, "weight", None)
    return isinstance(head, torch.Tensor) and head is model.transformer.wte.weight


def _replace(module: nn.Module, build, skip: set, prefix=""):
    for name, child in list(module.named_children()):
        full = f"{prefix}{name}"
        if isinstance(child, nn.Linear) and full not in skip:
            setattr(module, name, build(child))
        else:
            _replace(child, build, skip, full + ".")


def quantize_by_hand(model: nn.Module, scheme: str, include_lm_head: bool = False) -> nn.Module:
    """A copy of ``model`` with every ``nn.Linear`` replaced by an ``Int8Linear`` (weight-only INT8).

    ``lm_head`` is skipped unless ``include_lm_head``: quantizing it gives the output projection its own int8 copy
    of the embedding matrix, while ``wte`` must stay float for the input lookup — the tie is broken.
    """
    _check_scheme(scheme)
    out = copy.deepcopy(model)  # deepcopy keeps the wte/lm_head tie (one shared tensor in the memo)
    _replace(out, lambda lin: Int8Linear(lin, scheme), set() if include_lm_head else {"lm_head"})
    return out


def quantize_with_torch(model: nn.Module, scheme: str, include_lm_head: bool = False):
    """``torch.ao.quantization.quantize_dynamic`` with INT8 weights (one scale per tensor or per output channel).

    Dynamic quantization also quantizes each activation on the fly (one scale per batch) and runs an int8 matmul.
    Only ``nn.Linear`` modules are quantized: a ``Conv1D`` is passed by. ``lm_head`` is excluded by name unless
    ``include_lm_head``. Returns ``(quantized copy, deprecation warning text or None)``; the API is deprecated in
    favour of ``torchao`` (see the lesson page), and the warning is returned rather than printed every call.
    """
    _check_scheme(scheme)
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

    qconfig = per_channel_dynamic_qconfig if scheme == "per_channel" else default_dynamic_qconfig
    spec = {nn.Linear: qconfig}
    if not include_lm_head:
        spec["lm_head"] = None  # a module-name entry overrides the type entry
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = quantize_dynamic(model, spec, dtype=torch.qint8, inplace=False)
    notes = [str(w.message) for w in caught if issubclass(w.category, (DeprecationWarning, FutureWarning, UserWarning))]
    deprecation = next((n for n in notes if "deprecat" in n.lower()), None)
    return out, deprecation


def library_weight(module) -> torch.Tensor | None:
    """The float32 weight a (quantized) linear module computes with, or None for a module with no weight."""
    if isinstance(module, Int8Linear):
        return module.dequantized_weight()
    w = getattr(module, "weight", None)
    if callable(w):  # torch.ao dynamic quantized Linear: weight() returns a quantized tensor
        return w().dequantize()
    return w.detach().float() if isinstance(w, torch.Tensor) else None


def weight_error(w: torch.Tensor, w_hat: torch.Tensor) -> dict:
    """Max and mean absolute error and the signal-to-quantization-noise ratio 10·log10(Σw² / Σ(w-ŵ)²) in dB."""
    w, w_hat = w.detach().double(), w_hat.detach().double()
    err = w - w_hat
    noise = float((err**2).sum())
    sqnr = math.inf if noise == 0 else 10 * math.log10(float((w**2).sum()) / noise)
    return {"max_abs": float(err.abs().max()), "mean_abs": float(err.abs().mean()), "sqnr_db": sqnr}


def state_bytes(model: nn.Module) -> int:
    """Bytes of ``torch.save(model.state_dict())``: what the weights cost on disk (shared tensors count once)."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getbuffer().nbytes


def linear_names(model: nn.Module, include_lm_head: bool = False) -> list[str]:
    """Names of the ``nn.Linear`` modules (after conversion: the four per block), in model order."""
    return [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and (include_lm_head or n != "lm_head")]
