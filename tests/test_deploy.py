"""Deployments an operator would run: pinned parallelism, nodes, and the search's choice (hand-worked)."""
import pytest

from part1_capacity.cli import main
from part1_capacity.errors import InputError
from part1_capacity.plan import Workload, make_plan

GIB = 2 ** 30


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_pinned_tensor_parallel_llama70b_h100():
    # By hand: an H100 offers 80e9 × 0.9 − 2 GiB = 69.85 GB. Llama-3.1-70B bf16 = 141.1 GB → 35.28 GB per rank at
    # tensor 4, leaving 34.58 GB. One 32K sequence: 32,768 × 80 layers × 8 K/V heads × 128 × 2 (K, V) × 2 B
    # = 10 GiB, a quarter per rank = 2.68 GB → 12 sequences per group of 4, so 16 sequences need 2 groups.
    usable = 80e9 * 0.9 - 2 * GIB
    per_seq_rank = 32768 * 80 * 8 * 128 * 2 * 2 / 4
    per_group = int((usable - 70.55e9 * 2 / 4) // per_seq_rank)
    assert per_group == 12
    plan = make_plan("llama-3.1-70b", "h100", Workload(context=32768, batch=16, tensor_parallel=4))
    assert plan.parallelism["tensor"] == 4 and plan.parallelism["data"] == 2
    assert plan.accelerators_needed == 8


@pytest.mark.parametrize("tp, fragment", [(3, "allowed: 1, 2, 4, 8"), (16, "exceeds"), (0, "positive")])
def test_bad_tensor_parallel_is_one_line_exit_2(capsys, tp, fragment):
    code, _, err = run(capsys, "plan", "--model", "llama-3.1-70b", "--accelerator", "h100", "--context", "4096",
                       "--tensor-parallel", str(tp))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert fragment in err


def test_tensor_parallel_in_the_workload_is_validated():
    with pytest.raises(InputError, match="tensor_parallel"):
        make_plan("llama-3.1-8b", "h100", Workload(context=1024, tensor_parallel=True))
