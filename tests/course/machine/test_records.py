"""One run record for every measurement (``course.machine.records``), and saved results that predate it still read.

The old records below are copied from the saved results' keys (lesson 03's bench_latency.json, lesson 02's
training machine note, lesson 04's train_log.json, lesson 05's memory.json, an E3 run) with made-up values."""
from course.machine import records


def test_a_new_record_has_the_shared_keys_and_the_producers_own():
    r = records.run_record(["--tokens", "8"], program="python -m some.module", threads=1)
    assert r["command"] == "python -m some.module --tokens 8"      # a program of several words stays unquoted
    assert r["threads"] == 1
    assert set(r["host"]) >= {"node", "cpu", "cpus", "memory_bytes", "system", "python"}
    assert r["date_utc"].endswith(" UTC") and len(r["date_utc"]) == len("2026-12-02 18:28 UTC")
    back = records.read_record(r)
    assert back["date_utc"] == r["date_utc"] and back["host"] == r["host"] and back["command"] == r["command"]
    assert back["load_average_at_start"] == r["load_average_at_start"]
    assert records.read_record({"record": r, "other": 1})["command"] == r["command"]    # nested under "record"


def test_lesson03_bench_before_the_shared_record():
    old = {"date_utc": "2026-11-30 09:12 UTC", "host": "box", "cpu": "Some CPU", "torch": "2.13.0",
           "load_average_before_after": [1.25, 2.5], "command": "python -m x --tokens 512"}
    r = records.read_record(old)
    assert r["host"]["node"] == "box" and r["host"]["cpu"] == "Some CPU"
    assert (r["load_average_at_start"], r["load_average_at_end"]) == (1.25, 2.5)
    assert r["date_utc"] == "2026-11-30 09:12 UTC" and r["command"] == "python -m x --tokens 512"


def test_lesson02_machine_note_and_lesson05_memory_before_the_shared_record():
    note = {"torch_threads": 2, "cpu_count": 4, "loadavg_1min_at_end": 3.0, "loadavg_5min_at_end": 2.0}
    assert records.read_record(note)["host"]["cpus"] == 4
    assert records.read_record(note)["date_utc"] is None           # that note never had a date
    mem = {"date": "2026-11-29", "machine": "x86_64", "kernel": "6.1", "command": "python -m m --save"}
    assert records.read_record(mem)["date_utc"] == "2026-11-29"
    assert records.read_record(mem)["command"] == "python -m m --save"


def test_an_e3_run_before_the_shared_record():
    run = {"command": "capacity e3", "started_at": "2026-12-01T23:30:05+01:00",
           "host": {"hostname": "study", "cpu": "C", "cpus": 8, "loadavg_at_start": "0.52 0.61 0.70 1/234 5678"}}
    r = records.read_record(run)
    assert r["date_utc"] == "2026-12-01 22:30 UTC"                 # +01:00 read back in UTC
    assert r["host"]["node"] == "study" and r["host"]["cpus"] == 8
    assert r["load_average_at_start"] == 0.52 and r["command"] == "capacity e3"
