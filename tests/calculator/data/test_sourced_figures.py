"""Figures the calculator relies on, each checked against its primary source: the figure, where it was read, and
when. A row fails when the data (or the code) drifts from the source — including back to an old, wrong value.

To add a row: the quantity as the calculator holds it (a function of no arguments), the figure as the source
prints it (converted to the calculator's units in the row, never copied from the calculator's output), the
source (document and section), and the date it was read (UTC)."""
from dataclasses import dataclass
from typing import Callable

import pytest

from part1_capacity.calculator.model import weights
from part1_capacity.calculator.hardware.accelerators import load_accelerator
from part1_capacity.calculator.readers.loader import load_model
from part1_capacity.calculator.hardware.tiers import tiers_for

GB = 1e9


@dataclass(frozen=True)
class Figure:
    what: str
    value: Callable[[], float]      # the calculator's figure, in the unit of `figure`
    figure: float                   # the source's figure
    source: str
    read: str                       # date read, UTC
    rel: float = 1e-9


def acc(aid, attr, scale=1.0):
    return lambda: getattr(load_accelerator(aid), attr) / scale


def weights_gib(mid):
    return lambda: weights.weights_bytes(load_model(mid)) / 2 ** 30


def tier(aid, tid, attr="bandwidth", scale=GB):
    return lambda: getattr(next(t for t in tiers_for(load_accelerator(aid)) if t.id == tid), attr) / scale


ROWS = [
    # --- corrections (each was wrong before; the old value is in the comment) ---------------------------------
    # MI300X/MI325X peer HBM was 896/2 = 448 GB/s: 896 GB/s is the sum over 7 peers, one x16 link each.
    Figure("MI300X: link to one peer, GB/s both directions", acc("mi300x", "peer_link", GB), 128,
           "AMD Instinct MI300X datasheet / AMD CDNA 3 white paper: 7 Infinity Fabric links of 128 GB/s "
           "(64 GB/s each way), fully connected 8-GPU platform, 896 GB/s aggregate", "2026-12-02"),
    Figure("MI300X: peer-HBM tier bandwidth, GB/s one direction", tier("mi300x", "peer-hbm"), 64,
           "same: one x16 link per peer, 64 GB/s each way", "2026-12-02"),
    Figure("MI325X: peer-HBM tier bandwidth, GB/s one direction", tier("mi325x", "peer-hbm"), 64,
           "AMD Instinct MI325X datasheet: same Infinity Fabric as MI300X", "2026-12-02"),
    Figure("MI300X: aggregate Infinity Fabric, GB/s both directions", acc("mi300x", "interconnect", GB), 896,
           "AMD Instinct MI300X datasheet: 896 GB/s peak aggregate Infinity Fabric", "2026-12-02"),
    # TPU ICI was 200 / 600 / 448 GB/s (the Gbps figure / 8, halved).
    Figure("TPU v5e: ICI per chip, GB/s bidirectional", acc("tpu-v5e", "interconnect", GB), 400,
           "cloud.google.com/tpu/docs/v5e, system architecture: bidirectional ICI bandwidth per chip 400 GBps",
           "2026-12-02"),
    Figure("TPU v5p: ICI per chip, GB/s bidirectional", acc("tpu-v5p", "interconnect", GB), 1200,
           "cloud.google.com/tpu/docs/v5p: bidirectional ICI bandwidth per chip 1200 GBps", "2026-12-02"),
    Figure("TPU v6e: ICI per chip, GB/s bidirectional", acc("tpu-v6e", "interconnect", GB), 800,
           "cloud.google.com/tpu/docs/v6e: bidirectional ICI bandwidth per chip 800 GBps", "2026-12-02"),
    # Jetson AGX Orin int8 was 137.5 "dense" (= 275 / 2, but 275 is sparse AND includes the two DLAs).
    Figure("Jetson AGX Orin: GPU int8 dense, TOP/s", acc("jetson-agx-orin", "flops_int8", 1e12), 170 / 2,
           "NVIDIA Jetson AGX Orin Series technical brief: GPU 170 sparse INT8 TOPS, DLA 105 sparse (275 total); "
           "dense = sparse / 2", "2026-12-02"),
    # Snapdragon 8 Elite: the old source said 5300 MT/s x 16 B; a 64-bit bus moves 8 B per transfer.
    Figure("Snapdragon 8 Elite: memory bandwidth, GB/s", acc("snapdragon-8-elite", "bandwidth", GB), 10_600 * 8 / 1e3,
           "Qualcomm Snapdragon 8 Elite product page: LPDDR5x up to 5300 MHz (clock; 10,600 MT/s double data "
           "rate), 64-bit bus = 8 B per transfer", "2026-12-02"),
    # --- datasheet figures the calculator relies on ------------------------------------------------------------
    Figure("TPU v5e: HBM, GB", acc("tpu-v5e", "memory_bytes", GB), 16, "cloud.google.com/tpu/docs/v5e", "2026-12-02"),
    Figure("TPU v5e: HBM bandwidth, GB/s", acc("tpu-v5e", "bandwidth", GB), 819, "cloud.google.com/tpu/docs/v5e",
           "2026-12-02"),
    Figure("TPU v5e: bf16 peak, TFLOP/s", acc("tpu-v5e", "flops_16", 1e12), 197, "cloud.google.com/tpu/docs/v5e",
           "2026-12-02"),
    Figure("TPU v5e: int8 peak, TOP/s", acc("tpu-v5e", "flops_int8", 1e12), 393, "cloud.google.com/tpu/docs/v5e",
           "2026-12-02"),
    Figure("TPU v5e: chips per host", acc("tpu-v5e", "node_size"), 8, "cloud.google.com/tpu/docs/v5e", "2026-12-02"),
    Figure("TPU v5p: HBM bandwidth, GB/s", acc("tpu-v5p", "bandwidth", GB), 2765, "cloud.google.com/tpu/docs/v5p",
           "2026-12-02"),
    Figure("TPU v5p: bf16 peak, TFLOP/s", acc("tpu-v5p", "flops_16", 1e12), 459, "cloud.google.com/tpu/docs/v5p",
           "2026-12-02"),
    Figure("TPU v5p: chips per host", acc("tpu-v5p", "node_size"), 4, "cloud.google.com/tpu/docs/v5p (2x2x1 = 4 "
           "chips, 1 host)", "2026-12-02"),
    Figure("TPU v6e: HBM, GB", acc("tpu-v6e", "memory_bytes", GB), 32, "cloud.google.com/tpu/docs/v6e", "2026-12-02"),
    Figure("TPU v6e: HBM bandwidth, GB/s", acc("tpu-v6e", "bandwidth", GB), 1638, "cloud.google.com/tpu/docs/v6e",
           "2026-12-02"),
    Figure("TPU v6e: bf16 peak, TFLOP/s", acc("tpu-v6e", "flops_16", 1e12), 918, "cloud.google.com/tpu/docs/v6e",
           "2026-12-02"),
    Figure("TPU v6e: int8 peak, TOP/s", acc("tpu-v6e", "flops_int8", 1e12), 1836, "cloud.google.com/tpu/docs/v6e",
           "2026-12-02"),
    Figure("TPU v6e: chips per host", acc("tpu-v6e", "node_size"), 8, "cloud.google.com/tpu/docs/v6e", "2026-12-02"),
    Figure("MI300X: HBM3, GB", acc("mi300x", "memory_bytes", GB), 192, "AMD Instinct MI300X datasheet",
           "2026-12-02"),
    Figure("MI300X: HBM bandwidth, GB/s", acc("mi300x", "bandwidth", GB), 5300, "AMD Instinct MI300X datasheet",
           "2026-12-02"),
    Figure("MI300X: GPUs per platform", acc("mi300x", "node_size"), 8, "AMD Instinct MI300X platform (8 OAM)",
           "2026-12-02"),
    Figure("H100 SXM: HBM3, GB", acc("h100", "memory_bytes", GB), 80, "NVIDIA H100 datasheet, SXM", "2026-12-02"),
    Figure("H100 SXM: bandwidth, GB/s", acc("h100", "bandwidth", GB), 3350, "NVIDIA H100 datasheet, SXM",
           "2026-12-02"),
    Figure("H100 SXM: BF16 dense, TFLOP/s", acc("h100", "flops_16", 1e12), 1979 / 2,
           "NVIDIA H100 datasheet, SXM: 1,979 TFLOPS with sparsity", "2026-12-02", rel=1e-3),
    Figure("H100 SXM: NVLink, GB/s", acc("h100", "interconnect", GB), 900, "NVIDIA H100 datasheet, SXM",
           "2026-12-02"),
    Figure("HGX H100: GPUs per board", acc("h100", "node_size"), 8, "NVIDIA HGX H100 (8-GPU)", "2026-12-02"),
    Figure("H200: HBM3e, GB", acc("h200", "memory_bytes", GB), 141, "NVIDIA H200 datasheet", "2026-12-02"),
    Figure("H200: bandwidth, GB/s", acc("h200", "bandwidth", GB), 4800, "NVIDIA H200 datasheet", "2026-12-02"),
    Figure("A100 80GB SXM: HBM2e, GB", acc("a100", "memory_bytes", GB), 80,
           "NVIDIA A100 datasheet (80GB SXM)", "2026-12-02"),
    Figure("A100 80GB SXM: bandwidth, GB/s", acc("a100", "bandwidth", GB), 2039,
           "NVIDIA A100 datasheet (80GB SXM: 2,039 GB/s)", "2026-12-02"),
    Figure("A100: BF16 dense, TFLOP/s", acc("a100", "flops_16", 1e12), 624 / 2,
           "NVIDIA A100 datasheet: BF16 624 TFLOPS with sparsity", "2026-12-02"),
    Figure("A100: INT8 dense, TOP/s", acc("a100", "flops_int8", 1e12), 1248 / 2,
           "NVIDIA A100 datasheet: INT8 1,248 TOPS with sparsity", "2026-12-02"),
    Figure("A100 SXM: NVLink 3, GB/s", acc("a100", "interconnect", GB), 600, "NVIDIA A100 datasheet",
           "2026-12-02"),
    Figure("L4: GDDR6, GB", acc("l4", "memory_bytes", GB), 24, "NVIDIA L4 datasheet", "2026-12-02"),
    Figure("L4: bandwidth, GB/s", acc("l4", "bandwidth", GB), 300, "NVIDIA L4 datasheet", "2026-12-02"),
    Figure("L4: BF16 dense, TFLOP/s", acc("l4", "flops_16", 1e12), 242 / 2,
           "NVIDIA L4 datasheet: FP16/BF16 242 TFLOPS with sparsity", "2026-12-02"),
    Figure("L4: FP8 dense, TFLOP/s", acc("l4", "flops_fp8", 1e12), 485 / 2,
           "NVIDIA L4 datasheet: FP8 485 TFLOPS with sparsity", "2026-12-02", rel=3e-3),
    Figure("H100 SXM: FP8 dense, TFLOP/s", acc("h100", "flops_fp8", 1e12), 3958 / 2,
           "NVIDIA H100 datasheet, SXM: FP8 3,958 TFLOPS with sparsity", "2026-12-02", rel=1e-3),
    Figure("MI325X: HBM3E, GB", acc("mi325x", "memory_bytes", GB), 256, "AMD Instinct MI325X datasheet",
           "2026-12-02"),
    Figure("MI325X: bandwidth, GB/s", acc("mi325x", "bandwidth", GB), 6000, "AMD Instinct MI325X datasheet",
           "2026-12-02"),
    Figure("MI325X: BF16 dense, TFLOP/s", acc("mi325x", "flops_16", 1e12), 1307.4,
           "AMD Instinct MI325X datasheet: FP16/BF16 1,307.4 TFLOPS (dense)", "2026-12-02", rel=1e-3),
    Figure("Gaudi 3: HBM2e, GB", acc("gaudi3", "memory_bytes", GB), 128,
           "Intel, Hot Chips 2024 'Intel Gaudi 3 AI Accelerator' (spec table)", "2026-12-02"),
    Figure("Gaudi 3: bandwidth, GB/s", acc("gaudi3", "bandwidth", GB), 3670,
           "Intel, Hot Chips 2024: HBM bandwidth 3.67 TB/s", "2026-12-02"),
    Figure("Gaudi 3: BF16 matrix, TFLOP/s", acc("gaudi3", "flops_16", 1e12), 1835,
           "Intel, Hot Chips 2024: BF16 matrix 1,835 TFLOPs", "2026-12-02"),
    Figure("Gaudi 3: networking, GB/s bidirectional", acc("gaudi3", "interconnect", GB), 1200,
           "Intel, Hot Chips 2024: networking 1,200 GB/s bidirectional (24 x 200 GbE)", "2026-12-02"),
    Figure("GB200 NVL72: NVLink domain, GPUs", acc("gb200-nvl72", "max_tp"), 72, "NVIDIA GB200 NVL72 specifications",
           "2026-12-02"),
    Figure("GB200 NVL72: HBM3e per GPU, GB", acc("gb200-nvl72", "memory_bytes", GB), 13_400 / 72,
           "NVIDIA GB200 NVL72 specifications: 13.4 TB per rack of 72 GPUs", "2026-12-02", rel=2e-3),
    Figure("GB200 NVL72: BF16 dense per GPU, TFLOP/s", acc("gb200-nvl72", "flops_16", 1e12), 360_000 / 72 / 2,
           "NVIDIA GB200 NVL72 specifications: FP16/BF16 360 PFLOPS with sparsity per rack", "2026-12-02"),
    Figure("PCIe Gen5 x16 host link, GB/s one direction", tier("h100", "host-dram"), 32 * 16 * 128 / 130 / 8,
           "PCI-SIG PCIe 5.0: 32 GT/s per lane, 128b/130b encoding", "2026-12-02", rel=2e-2),
    Figure("PCIe 4.0 x16 host link of a workstation card, GB/s one direction", tier("rtx-4090", "host-dram-pcie4"),
           16 * 16 * 128 / 130 / 8, "PCI-SIG PCIe 4.0: 16 GT/s per lane, 128b/130b encoding", "2026-12-03",
           rel=2e-3),
    Figure("Client NVMe SSD, sequential read GB/s", tier("m4-max", "nvme-gen4"), 7.45,
           "Samsung 990 PRO data sheet: sequential read up to 7,450 MB/s", "2026-12-03"),
    Figure("Phone UFS 4.0 storage, sequential read GB/s", tier("snapdragon-8-elite", "ufs"), 4.2,
           "Samsung UFS 4.0 announcement (2022): sequential read up to 4,200 MB/s", "2026-12-03"),
    # --- weights (weights.py) ---------------------------------------------------------------------------------
    # gpt-oss was every parameter at MXFP4's 4.25 bits: 10.3 GiB (20b) and 57.8 GiB (120b).
    Figure("gpt-oss-20b: checkpoint, GiB (MXFP4 experts + bf16 rest)", weights_gib("gpt-oss-20b"), 12.8,
           "gpt-oss model card (arXiv 2508.10925), Table 1: MLP 19.12B, attention 0.64B, embed+unembed 1.16B; "
           "checkpoint 12.8 GiB; only the MoE weights are MXFP4", "2026-12-02", rel=0.005),
    Figure("gpt-oss-120b: checkpoint, GiB (MXFP4 experts + bf16 rest)", weights_gib("gpt-oss-120b"), 60.8,
           "gpt-oss model card (arXiv 2508.10925), Table 1: MLP 114.71B, attention 0.96B, embed+unembed 1.16B; "
           "checkpoint 60.8 GiB", "2026-12-02", rel=0.005),
    # DeepSeek-V3 was 685 B loaded (638 GiB): the checkpoint with its 14 B MTP module, which vLLM skips.
    Figure("DeepSeek-V3: FP8 weights a server loads, GB", lambda: weights.weights_bytes(load_model("deepseek-v3")) / GB,
           671, "deepseek-ai/DeepSeek-V3 README: 671B total (685B on the hub = 671B main + 14B MTP module); vLLM "
           "vllm/model_executor/models/deepseek_v2.py load_weights skips the spec-decode (MTP) layers", "2026-12-02"),
    Figure("DeepSeek-V3: FP8 weights with MTP speculative decoding, GB",
           lambda: weights.weights_bytes(load_model("deepseek-v3"), mtp=True) / GB, 685,
           "same README: 685B including the MTP module", "2026-12-02"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.what for r in ROWS])
def test_figure_matches_its_source(row):
    assert row.source and row.read
    assert row.value() == pytest.approx(row.figure, rel=row.rel)


def test_every_tier_latency_is_from_the_accelerator():
    """One definition per column: a latency published from the host CPU is converted to what a load from the
    accelerator pays, so no off-accelerator tier is quicker than the accelerator's own HBM (the old table put
    CXL at 350 ns, below HBM's 600, because 350 was measured from the CPU)."""
    ts = tiers_for(load_accelerator("h100"))
    lat = {t.id: t.latency_s for t in ts}
    assert all(t.measured_from for t in ts)
    assert min(lat.values()) == lat["hbm"]
    assert lat["cxl"] > lat["host-dram"]          # the expander sits behind the same PCIe hop as host DRAM


def test_snapdragon_bandwidth_derivation_moves_8_bytes_per_transfer():
    """The old derivation read '5300 MT/s × 16 B (64-bit)': the right figure for the wrong reasons (a 64-bit bus
    moves 8 B per transfer; 5,300 MHz is the clock of a double-data-rate bus, 10,600 MT/s)."""
    src = load_accelerator("snapdragon-8-elite").source
    assert "16 B" not in src and "10,600 MT/s x 8 B" in src
