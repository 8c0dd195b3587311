"""course.grading.method in the learner's process: tripwires installed before any learner code, and the watch around a graded
call. Run in a fresh interpreter (as the learner's process is), so this test process's torch stays untouched."""
import subprocess
import sys

from course.grading.notebook_spec import REPO

SCRIPT = r'''
import importlib, sys
from course.grading import method

method.install()                       # before any learner code: torch is not even imported yet
import torch
import torch.nn.functional as F
from torch import nn

saved = torch._C._nn.scaled_dot_product_attention      # a reference a notebook keeps from its first cell
q = torch.randn(1, 2, 3, 4)
plain = torch.softmax(q @ q.transpose(-2, -1) / 2, -1) @ q

# outside a graded call everything passes through: a notebook may compare with torch in its own cells
assert torch.allclose(F.scaled_dot_product_attention(q, q, q), plain, atol=1e-6)
assert torch.allclose(saved(q, q, q), plain, atol=1e-6)
nn.MultiheadAttention(4, 2)

def refused(run, keys):
    with method.watch(keys) as seen:
        try:
            run()
            outcome = "ran"
        except method.Refused:
            outcome = "refused"
    return outcome, sorted(set(seen))

print("saved", refused(lambda: saved(q, q, q), ["torch_sdpa"]))
print("getattr", refused(lambda: getattr(importlib.import_module("torch.nn.functional"), "scaled_dot_product_attention")(q, q, q), ["torch_sdpa"]))
print("aten", refused(lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q), ["torch_sdpa"]))
print("math", refused(lambda: torch.ops.aten._scaled_dot_product_attention_math(q, q, q), ["torch_sdpa"]))
print("mha", refused(lambda: nn.MultiheadAttention(4, 2), ["torch_mha"]))
print("mha_class_saved", refused(lambda: nn.modules.activation.MultiheadAttention(4, 2), ["torch_mha"]))
print("not_forbidden", refused(lambda: saved(q, q, q), ["torch_quantize"]))
print("by_hand", refused(lambda: torch.softmax(q @ q.transpose(-2, -1) / 2, -1) @ q, ["torch_sdpa", "torch_mha"]))
import torch.ao.quantization as Q     # imported after install: patched as it loads
print("late_import", refused(lambda: Q.quantize_dynamic(nn.Sequential(nn.Linear(4, 4))), ["torch_quantize"]))
print("quantize", refused(lambda: torch.quantize_per_tensor(q, 0.1, 0, torch.qint8), ["torch_quantize"]))
'''


def test_tripwires_and_watch_in_a_fresh_process():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert got == {
        "saved": "('refused', ['torch_sdpa'])",             # the reference kept early is the tripwire
        "getattr": "('refused', ['torch_sdpa'])",
        "aten": "('ran', ['torch_sdpa'])",                  # no Python entry point: the modes see the operator
        "math": "('ran', ['torch_sdpa'])",
        "mha": "('refused', ['torch_mha'])",
        "mha_class_saved": "('refused', ['torch_mha'])",   # the class's own methods are wired, however reached
        "not_forbidden": "('ran', [])",                     # what this call does not forbid passes through
        "by_hand": "('ran', [])",                           # attention written from matrix products: nothing seen
        "late_import": "('refused', ['torch_quantize'])",
        "quantize": "('refused', ['torch_quantize'])",
    }, out.stdout
