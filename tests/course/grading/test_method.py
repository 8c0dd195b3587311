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


LOCK_SCRIPT = r'''
from course.grading import method

method.install()
import torch
import torch.nn.functional as F
from torch import nn

q = torch.randn(1, 2, 3, 4)
saved = torch._C._nn.scaled_dot_product_attention          # kept before the lock, as a first cell could


def unwrapped(f):
    for cell in getattr(f, "__closure__", None) or ():
        if callable(cell.cell_contents):
            return cell.cell_contents
    return f


def closure():
    with torch._C.DisableTorchFunction():                   # else the binding hands the call to the mode, by name
        return unwrapped(torch._C._nn.scaled_dot_product_attention)(q, q, q)


def switch_off():
    method._ACTIVE[0] = frozenset()
    return F.scaled_dot_product_attention(q, q, q)


def no_modes():
    with torch._C.DisableTorchFunction():
        return torch.ops.aten._scaled_dot_product_attention_math(q, q, q)[0]


def inference():
    with torch.inference_mode(), torch._C.DisableTorchFunction():
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)[0]


DODGES = {
    "closure": closure,
    "switch_off": switch_off,
    "no_modes": no_modes,
    "inference": inference,
    "saved": lambda: saved(q, q, q),
    "mha": lambda: nn.MultiheadAttention(4, 2),
    "masked_softmax": lambda: torch._masked_softmax(q, torch.zeros(q.shape, dtype=torch.bool)),
}


def outcome(run):
    try:
        run()
        return "ran"
    except method.Refused:
        return "refused"


for name, run in DODGES.items():                            # the watch alone (the grader's own process)
    active = method._ACTIVE[0]
    with method.watch(["torch_sdpa", "torch_mha"]) as seen:
        result = outcome(run)
    method._ACTIVE[0] = active
    print("watch", name, result, bool(seen))
ops = method.lock(["torch_sdpa", "torch_mha"])
print("ops", "aten::_scaled_dot_product_flash_attention_for_cpu" in ops, "aten::_masked_softmax" in ops,
      "aten::softmax" in ops)
for name, run in DODGES.items():                            # locked: nothing to dodge, in or out of a graded call
    print("locked", name, outcome(run))
import torch.nn.attention.flex_attention as flex            # imported after the lock: refused as it loads
print("locked late_import", outcome(lambda: flex.flex_attention(q, q, q)))
print("locked by_hand", outcome(lambda: torch.softmax(q @ q.transpose(-2, -1) / 2, -1) @ q))
print("locked other_key", outcome(lambda: torch.quantize_per_tensor(q, 0.1, 0, torch.qint8)))
'''


def test_the_lock_takes_away_what_the_watch_can_be_talked_out_of():
    out = subprocess.run([sys.executable, "-c", LOCK_SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = {tuple(line.split(" ")[:2]): " ".join(line.split(" ")[2:]) for line in out.stdout.splitlines()}
    # The watch is real but lives in the learner's reach: a tripwire's closure holds the original, the switch it reads
    # is a module global, and with torch functions disabled an ATen operator goes by unseen.
    watched = {"closure": "ran False", "switch_off": "ran False", "no_modes": "ran False", "inference": "ran False",
               "saved": "refused True", "mha": "refused True", "masked_softmax": "ran True"}
    assert {k[1]: v for k, v in got.items() if k[0] == "watch"} == watched, out.stdout
    assert got[("ops", "True")] == "True False", out.stdout    # the CPU kernel and the masked softmax; not softmax
    locked = {name: "refused" for name in watched} | {"late_import": "refused", "by_hand": "ran", "other_key": "ran"}
    assert {k[1]: v for k, v in got.items() if k[0] == "locked"} == locked, out.stdout
