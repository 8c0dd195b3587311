"""A hostile Hub mirror (tests/support/local_hub.py, ``Repo.hostile``) on 127.0.0.1: every answer it can give ends in one
line or the right plan — never a hang, never an answer read whole into memory, never a file left in the Hub cache
that was refused, never a path outside it.

The deadlines are set small here (CAPACITY_HUB_REQUEST_DEADLINE 1 s) so a trickling server is cut within seconds;
no timing is asserted (the hang guard of tests/part1/cli/test_refusals.py fails a case that does not end)."""
import json
import os

import pytest

from part1_capacity.calculator.base.errors import InputError
from part1_capacity.calculator.readers.loader import load_model
from tests.support.local_hub import Repo
from tests.part1.cli.test_refusals import no_hang  # noqa: F401  (the hang guard is a fixture)
from tests.calculator.readers.test_hub import BYTES, TINY, hub, llama_tensors, one_line, safetensors, sharded_repo  # noqa: F401

PLAN = ["--accelerator", "h100", "--context", "1024"]


@pytest.fixture
def short(monkeypatch):
    monkeypatch.setenv("CAPACITY_HUB_REQUEST_DEADLINE", "1")
    monkeypatch.setenv("CAPACITY_HUB_DEADLINE", "10")    # the request's 1 s is what cuts, even on a loaded machine


def cache_files(tmp_path):
    root = tmp_path / "cache"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.mark.parametrize("target, how", [("api", "trickle"), ("model-00002-of-00002.safetensors", "trickle"),
                                         ("config.json", "trickle-headers")])
def test_a_trickling_hub_is_cut_at_the_deadline(hub, capsys, short, tmp_path, target, how):
    hub.repos["org/slow"] = sharded_repo(hostile={target: how})
    one_line(capsys, ["plan", "--model", "org/slow", *PLAN], "within the request's 1 s (CAPACITY_HUB_REQUEST_DEADLINE)")
    assert cache_files(tmp_path) == []


def test_the_command_deadline_bounds_all_its_requests(hub, capsys, monkeypatch, tmp_path):
    # each request within its own 10 s, but the command has 1 s for all of them
    monkeypatch.setenv("CAPACITY_HUB_REQUEST_DEADLINE", "10")
    monkeypatch.setenv("CAPACITY_HUB_DEADLINE", "1")
    hub.repos["org/slow"] = sharded_repo(hostile={"config.json": "trickle"})
    one_line(capsys, ["plan", "--model", "org/slow", *PLAN], "within the command's 1 s (CAPACITY_HUB_DEADLINE)")


@pytest.mark.parametrize("target, what", [("api", "the file list"), ("config.json", "config.json"),
                                          ("model.safetensors.index.json", "model.safetensors.index.json")])
@pytest.mark.parametrize("how", ["huge", "endless"])
def test_a_huge_answer_is_refused_at_its_cap_never_read_whole(hub, capsys, tmp_path, target, what, how):
    # the default deadlines (30 s a request): the size cap, not the clock, must be what cuts the answer
    repo = hub.repos["org/huge"] = sharded_repo(hostile={target: how})
    one_line(capsys, ["plan", "--model", "org/huge", *PLAN], f"bytes for {what} of org/huge")
    sent = max(e["sent"] for e in hub.log if e["path"].endswith(target if target != "api" else "org/huge"))
    assert sent < 100 * 2 ** 20, sent           # the caps are 4, 16 and 64 MiB; the server had 3 GB to send
    assert cache_files(tmp_path) == []
    assert repo.files                             # (the repository itself is untouched)


def test_a_config_over_its_cap_is_refused_and_left_out_of_the_cache(hub, capsys, tmp_path):
    # 5 MiB of spaces after a valid object: a config.json past the 4 MiB cap, with its true Content-Length
    big = json.dumps(TINY).encode() + b" " * (5 * 2 ** 20)
    hub.repos["org/big"] = Repo(files={"config.json": big})
    one_line(capsys, ["plan", "--model", "org/big", *PLAN], "answers 5,243,")
    assert cache_files(tmp_path) == []


def test_a_refused_model_leaves_nothing_in_the_cache_and_a_read_one_does(hub, capsys, tmp_path):
    hub.repos["org/bad"] = Repo(files={"config.json": json.dumps({**TINY, "torch_dtype": "float64"}).encode()})
    one_line(capsys, ["plan", "--model", "org/bad", *PLAN], "'float64' is a dtype the calculator does not size")
    assert cache_files(tmp_path) == []
    hub.repos["org/tiny"] = sharded_repo()
    load_model("org/tiny")
    files = cache_files(tmp_path)
    assert "models--org--tiny/refs/main" in files and any(f.endswith("/config.json") for f in files), files


@pytest.mark.parametrize("target", ["api", "model-00001-of-00002.safetensors", "config.json"])
def test_a_redirect_loop_is_one_line(hub, capsys, short, target):
    hub.repos["org/loop"] = sharded_repo(hostile={target: "redirect-loop"})
    one_line(capsys, ["plan", "--model", "org/loop", *PLAN], "more than 5 times (a redirect loop)")


@pytest.mark.parametrize("target", ["api", "config.json", "model.safetensors.index.json",
                                    "model-00001-of-00002.safetensors"])
@pytest.mark.parametrize("how", ["lying-short", "lying-long"])
def test_a_lying_content_length_is_one_line_or_the_right_plan(hub, capsys, short, tmp_path, target, how):
    from part1_capacity.cli import main
    hub.repos["org/liar"] = sharded_repo(hostile={target: how})
    if main(["plan", "--model", "org/liar", *PLAN, "--json"]) == 0:
        # a shard's header is its first bytes: a length that lies about the rest may not matter, and then the plan
        # must be the right one
        assert json.loads(capsys.readouterr().out)["weights_bytes"] == BYTES
        assert target.endswith(".safetensors")
        return
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "org/liar" in err and "Traceback" not in err, err
    assert cache_files(tmp_path) == []


def test_a_hub_that_ignores_range_gives_the_right_plan_from_the_first_bytes(hub, capsys):
    # shards of 64 MiB each beyond their header: ignoring Range, the server would send them whole
    t = llama_tensors()
    big = {**t, "pad": ("BF16", (32 * 2 ** 20,), 2)}
    data = safetensors(big)
    hub.repos["org/norange"] = Repo(files={"config.json": json.dumps(TINY).encode(), "model.safetensors": data},
                                    hostile={"model.safetensors": "no-range"})
    m = load_model("org/norange")
    assert m.checkpoint.loaded_bytes == BYTES + 32 * 2 ** 20 * 2     # the tensors' bytes by hand, the pad's too
    sent = [e["sent"] for e in hub.log if e["path"].endswith("model.safetensors")]
    assert sent and max(sent) < len(data) / 4, (sent, len(data))     # cut after the header's bytes, not read whole


def test_a_gguf_whose_hub_ignores_range_is_read_by_its_first_bytes(hub, capsys, tmp_path):
    from tests.calculator.readers.test_hub import gguf_bytes
    data = gguf_bytes(tmp_path) + b"\0" * (64 * 2 ** 20)             # 64 MiB more the client never needs
    hub.repos["org/g"] = Repo(files={"tiny-f16.gguf": data}, hostile={"tiny-f16.gguf": "no-range"})
    assert load_model("org/g").checkpoint.loaded_bytes == 4096 * 512 * 2 + 512 * 4
    assert max(e["sent"] for e in hub.log if e["path"].endswith(".gguf")) < len(data) / 4


@pytest.mark.parametrize("rev", ["../../../../../x", "/etc", "a/../../b", "main\nsecond line", "v1\x1b[2J", "",
                                 "a" * 256, "x\\..\\y"])
def test_a_revision_is_checked_like_an_id(hub, capsys, tmp_path, rev):
    hub.repos["org/tiny"] = sharded_repo()
    outside = tmp_path / "x"
    one_line(capsys, ["plan", "--model", "org/tiny", "--revision", rev, *PLAN],
             "is not a revision (a branch, tag or commit: no '..' segment, no leading '/', no control characters")
    assert hub.log == [] and not outside.exists() and cache_files(tmp_path) == []
    # the same revision folded into the id
    with pytest.raises(InputError, match="is not a revision|is not a model id or a path"):
        load_model(f"org/tiny@{rev}")


@pytest.mark.parametrize("name", ["../escape.json", "a/../../b", "x\ny", "/abs"])
def test_a_file_list_naming_no_file_is_refused(hub, capsys, name):
    hub.repos["org/names"] = Repo(files={"config.json": json.dumps(TINY).encode(), name: b"x"})
    one_line(capsys, ["plan", "--model", "org/names", *PLAN], "not a file name")


def test_a_deadline_that_is_no_number_is_one_line(hub, capsys, monkeypatch):
    monkeypatch.setenv("CAPACITY_HUB_DEADLINE", "soon")
    hub.repos["org/tiny"] = sharded_repo()
    one_line(capsys, ["plan", "--model", "org/tiny", *PLAN], "CAPACITY_HUB_DEADLINE: expected a number")
    assert os.environ["CAPACITY_HUB_DEADLINE"] == "soon"
