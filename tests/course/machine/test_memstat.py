"""course.machine.memstat against the kernel's own bookkeeping, on small files (a few MiB, < 2 s)."""
import mmap
import os

import pytest

from course.machine import memstat

MIB = 1024 * 1024
PAGE = memstat.PAGE_SIZE




def _write(path, n_bytes):
    with open(path, "wb") as f:
        f.write(os.urandom(n_bytes))
        f.flush()
        os.fsync(f.fileno())
    return path


def test_rss_parts_add_up_to_vmrss():
    split = memstat.rss_split()
    assert min(split.anon, split.file, split.shmem) >= 0
    # VmRSS is by definition RssAnon + RssFile + RssShmem; two reads apart, allow a little drift.
    assert abs(split.total - memstat.vm_rss()) < 4 * MIB


def test_touched_heap_memory_is_anonymous():
    # A fresh anonymous mapping (what malloc asks the kernel for): its pages are not resident until written. A plain
    # bytes object could reuse heap pages an earlier test left resident and move nothing in a long test run.
    with mmap.mmap(-1, 64 * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as block:
        before = memstat.rss_split()
        for off in range(0, len(block), PAGE):
            block[off] = 1              # one write per page makes every page resident
        after = memstat.rss_split()
    assert after.anon - before.anon >= 60 * MIB
    assert after.file - before.file < 4 * MIB


def test_mmap_reads_grow_file_backed_rss_not_anonymous(disk_dir):
    path = _write(os.path.join(disk_dir, "f.bin"), 32 * MIB)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        before = memstat.rss_split()
        total = 0
        for off in range(0, len(m), PAGE):
            total += m[off]
        after = memstat.rss_split()
    assert after.file - before.file >= 30 * MIB
    assert abs(after.anon - before.anon) < 4 * MIB


def test_residency_drops_to_zero_then_rises_as_pages_are_read(disk_dir):
    size = 8 * MIB + 100  # a partial last page
    path = _write(os.path.join(disk_dir, "f.bin"), size)
    memstat.drop_file_pages(path)
    assert memstat.file_resident_bytes(path) == 0
    pages, n_pages = memstat.resident_pages(path)
    assert (pages, n_pages) == (0, -(-size // PAGE))

    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)  # no readahead: read exactly what we ask
        f.read(2 * MIB)
    half = memstat.file_resident_bytes(path)
    assert 2 * MIB <= half < size

    with open(path, "rb") as f:
        f.read()
    assert memstat.file_resident_bytes(path) == size
    memstat.drop_file_pages(path)
    assert memstat.file_resident_bytes(path) == 0


def test_major_faults_on_cold_pages_not_on_warm_ones(disk_dir):
    path = _write(os.path.join(disk_dir, "f.bin"), 16 * MIB)
    offsets = range(0, 16 * MIB, 16 * PAGE)  # 256 pages, far apart
    memstat.drop_file_pages(path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        m.madvise(mmap.MADV_RANDOM)  # no readahead: every cold touch is its own disk read
        major0, _ = memstat.fault_counts()
        for off in offsets:
            m[off]
        major1, _ = memstat.fault_counts()
    assert major1 - major0 >= len(offsets)  # each touched page was absent: one major fault each

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        major2, minor2 = memstat.fault_counts()
        for off in offsets:
            m[off]
        major3, minor3 = memstat.fault_counts()
    assert major3 == major2  # pages are cached now: mapping them costs minor faults only
    assert minor3 > minor2


def test_meminfo_matches_sysconf():
    info = memstat.meminfo()
    assert info.total == os.sysconf("SC_PHYS_PAGES") * PAGE
    assert 0 < info.available <= info.total
    assert 0 <= info.cached <= info.total
    assert 0 < info.free <= info.total


def test_psi_parsing_and_absence(tmp_path):
    sample = tmp_path / "memory"
    sample.write_text(
        "some avg10=1.50 avg60=0.20 avg300=0.00 total=123\nfull avg10=0.75 avg60=0.10 avg300=0.00 total=45\n"
    )
    assert memstat.psi_memory(str(sample)) == memstat.Psi(some_avg10=1.5, full_avg10=0.75)
    assert memstat.psi_memory(str(tmp_path / "absent")) is None
    live = memstat.psi_memory()
    if live is not None:
        assert 0.0 <= live.full_avg10 <= live.some_avg10 <= 100.0


def test_filesystem_type_of_proc_and_root():
    assert memstat.filesystem_type("/proc/self") == "proc"
    assert memstat.filesystem_type("/") not in ("", "unknown")


def _fake_cgroup_tree(tmp_path, version, limit, usage, stat):
    """A cgroup mount with this process in /a/b, the limit on /a, usage and stat on both levels."""
    mount = tmp_path / "cg"
    (mount / "a" / "b").mkdir(parents=True)
    if version == "v1":
        mounts = f"cgroup {mount} cgroup rw,relatime,memory 0 0\n"
        own = "4:memory:/a/b\n0::/\n"
        (mount / "a" / "memory.limit_in_bytes").write_text(f"{limit}\n")
        (mount / "a" / "b" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "unlimited"
        names = ("memory.usage_in_bytes", "memory.stat")
    else:
        mounts = f"cgroup2 {mount} cgroup2 rw,relatime 0 0\n"
        own = "0::/a/b\n"
        (mount / "a" / "memory.max").write_text(f"{limit}\n")
        (mount / "a" / "b" / "memory.max").write_text("max\n")
        names = ("memory.current", "memory.stat")
    for level in (mount / "a", mount / "a" / "b"):
        (level / names[0]).write_text(f"{usage}\n")
        (level / names[1]).write_text(stat)
    (tmp_path / "mounts").write_text(mounts)
    (tmp_path / "cgroup").write_text(own)
    return str(tmp_path / "mounts"), str(tmp_path / "cgroup"), str(mount / "a")


@pytest.mark.parametrize("version, stat", [
    ("v1", "cache 1\nrss 2\ntotal_cache 3000\ntotal_rss 5000\ntotal_active_file 1000\ntotal_inactive_file 1500\n"
           "active_file 7\ninactive_file 7\n"),
    ("v2", "anon 5000\nfile 3000\nactive_file 1000\ninactive_file 1500\n"),
])
def test_cgroup_memory_reads_the_tightest_group(tmp_path, version, stat):
    mounts, own, limited = _fake_cgroup_tree(tmp_path, version, limit=10_000, usage=8_000, stat=stat)
    g = memstat.cgroup_memory(mounts, own)
    # v1 reads the hierarchical total_* lines (the group's children included), v2 the group's own
    assert g == memstat.CgroupMemory(limited, 10_000, 8_000, 2_500, 3_000)
    assert g.available == 10_000 - 8_000 + 2_500


def test_cgroup_memory_none_without_a_limit(tmp_path):
    mounts, own, limited = _fake_cgroup_tree(tmp_path, "v2", limit=10_000, usage=1, stat="file 0\n")
    (tmp_path / "cg" / "a" / "memory.max").write_text("max\n")
    assert memstat.cgroup_memory(mounts, own) is None


def test_group_view_is_the_smaller_machine():
    host = memstat.MemInfo(total=25_000, available=20_000, cached=4_000, free=15_000)
    g = memstat.CgroupMemory("/x", limit=8_000, usage=6_000, file=2_500, cache=3_000)
    assert memstat.group_view(host, g) == memstat.MemInfo(8_000, 4_500, 3_000, 2_000, "cgroup")
    # the host's MemAvailable bounds the group's: other work outside the group takes memory too
    busy = memstat.MemInfo(total=25_000, available=3_000, cached=4_000, free=1_000)
    assert memstat.group_view(busy, g) == memstat.MemInfo(8_000, 3_000, 3_000, 1_000, "cgroup")
    # no group, or a limit at or above the host's RAM: the host itself
    assert memstat.group_view(host, None) is host
    assert memstat.group_view(host, memstat.CgroupMemory("/x", 30_000, 0, 0, 0)) is host
