"""The shared-memory instructions ptxas emits, from the access model (matviz.core.instructions)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from matviz.backends import sim_model
from matviz.core import access, banks, sass_table, store_fills
from matviz.core import instructions as ins
from matviz.core.registry import get_kernel, kernels


def config(kernel: str, size: int = 1024, **params):
    return get_kernel(kernel).configure(params, size, size, size)


def warp_instructions(cfg, warp: int = 0, t: int = 0):
    return ins.instructions(cfg, access.access_records(cfg, warp, (0, 0), t))


def test_vector_width_lives_in_core_and_the_simulator_uses_it():
    assert sim_model.vector_width is ins.vector_width


def test_tiled_pad0_reads_as_with_8_lds128_per_ktile():
    cfg = config("tiled", tile=32, pad=0)
    instrs = warp_instructions(cfg)
    ops = [(i.site, i.opcode) for i in instrs]
    assert ops[:3] == [("st_As", "STS"), ("st_Bs", "STS"), ("ld_As", "LDS.128")]
    ld_as = [i for i in instrs if i.site == "ld_As"]
    assert len(ld_as) == 8 and all(i.per_step == 8 for i in ld_as)
    assert [i.ks for i in ld_as] == [tuple(range(k, k + 4)) for k in range(0, 32, 4)]
    assert ld_as[1].ks_text() == "k=4–7"
    rec = access.access_records(cfg, 0)
    first = next(r for r in rec if r["site"] == "ld_As" and r["k"] == 4)
    np.testing.assert_array_equal(ld_as[1].offsets, first["offsets"])  # the vector's start
    # warp 0 at T=32 is one row of the tile: every lane reads the same 16 bytes
    assert all(i.wavefronts == 2 and i.conflict_degree == 1 for i in ld_as)
    assert sum(1 for i in instrs if i.opcode == "LDS") == 32  # ld_Bs walks a column: scalar
    summary = {s.site: s for s in ins.summarise(cfg, instrs)}
    assert (summary["ld_As"].count, summary["ld_As"].each, summary["ld_As"].repeat) == (8, 2, 32)


@pytest.mark.parametrize(("pad", "opcode", "count", "each"), [
    (0, "LDS.128", 8, 2), (1, "LDS", 32, 1), (2, "LDS.64", 16, 1), (4, "LDS.128", 8, 2),
])  # fmt: skip
def test_tiled_a_load_by_pad(pad, opcode, count, each):
    cfg = config("tiled", tile=32, pad=pad)
    s = {s.site: s for s in ins.summarise(cfg, warp_instructions(cfg))}["ld_As"]
    assert (s.opcode, s.count, s.each) == (opcode, count, each)


def test_register_tiling_merges_along_its_chains():
    cfg = config("register_tiling_1d", BM=64, BN=64, BK=8, TM=8)
    ld_as = [i for i in warp_instructions(cfg) if i.site == "ld_As"]
    assert len(ld_as) == 8 * 8 // 4 and {i.opcode for i in ld_as} == {"LDS.128"}
    # As[(tid / BN) * TM + k % TM][k / TM]: instance k + TM is the next column of the row
    assert ld_as[0].ks == (0, 8, 16, 24) and ld_as[0].ks_text() == "k=0,8,16,24"


@pytest.mark.parametrize(
    "kernel", [k.name for k in kernels().values() if any(map(k.sites_at, k.configurations()))]
)
def test_instruction_counts_follow_what_ptxas_emitted(kernel):
    """resources/bench/sass_sm90_shared_ops.json holds every configuration with shared-memory
    sites, and per warp and k-step ptxas emits the model's merged instructions, cp.async
    copies (LDGSTS) and ldmatrix included. Where it emits more, they are scalar LDS it reads
    again for want of registers (kernel 05 at TM4 TN8 and TM8 TN4), which the banks view
    quotes. Kernel 04 matches since its thread runs down its rows with the step's Bs values
    held: with k outermost, ptxas added scalar LDS of As it had no registers to keep."""
    k = get_kernel(kernel)
    for params in filter(k.sites_at, k.configurations()):
        cfg = k.configure(params, 128, 128, 128)
        model = Counter(i.opcode for i in warp_instructions(cfg))
        emitted = sass_table.emitted(k.stem, k.labels(params))
        assert emitted is not None, params
        extra = Counter(emitted)
        extra.subtract(model)
        assert min(extra.values()) >= 0 and set(+extra) <= {"LDS"}, (params, emitted, model)
        if kernel != "register_tiling_2d":
            assert emitted == model, params


def test_broadcast_rule_in_instructions():
    lds128 = ins.Instruction("x", "load", 16, (0, 1, 2, 3), (0,), np.full(32, 64), 1)
    lds64 = ins.Instruction("x", "load", 8, (0, 1), (0,), np.full(32, 64), 1)
    assert (lds128.wavefronts, lds128.ideal_wavefronts) == (2, 2)
    assert (lds64.wavefronts, lds64.ideal_wavefronts) == (1, 1)
    two_rows = ins.Instruction("x", "load", 16, (0,), (0,), np.where(np.arange(32) < 16, 0, 68), 1)
    assert two_rows.wavefronts == 2  # two rows in distinct banks: as ncu measured at T=16
    rows_32_apart = np.where(np.arange(32) < 16, 0, 128)
    same_banks = ins.Instruction("x", "load", 16, (0,), (0,), rows_32_apart, 1)
    # words 0-3 and 32-35 share banks, but in different phases; each group of four lanes reads
    # one element: 2, as ncu counts for lane i reading element 2(i / 4) on the H200
    assert same_banks.wavefronts == 2
    assert bool(banks.warp_broadcast(np.full(32, 8))) and not banks.warp_broadcast(np.full(32, -1))


def _change(kernel, tile, pad, site):
    before, after = config(kernel, tile=tile, pad=0), config(kernel, tile=tile, pad=pad)
    return next(c for c in ins.compare(before, after) if c.after.site == site)


def test_pad1_loses_lds128_on_kernel_02():
    ch = _change("tiled", 32, 1, "ld_As")
    assert (ch.before.opcode, ch.before.count) == ("LDS.128", 8)
    assert (ch.after.opcode, ch.after.count) == ("LDS", 32)
    assert ch.pitch_bytes == 132 and ch.pair is None and ch.changed


def test_pad1_removes_the_transposed_store_conflict():
    ch = _change("tiled_transposed", 32, 1, "st_As")
    assert (ch.before.degree, ch.after.degree) == (32, 1)
    assert (ch.before.wavefronts, ch.after.wavefronts) == (32, 1)


@pytest.mark.parametrize(("kernel", "tile", "pad", "site", "degree"), [
    ("tiled", 16, 1, "st_As", 2), ("tiled", 16, 1, "st_Bs", 2),
    ("tiled_transposed", 32, 2, "st_As", 2), ("tiled_transposed", 32, 4, "st_As", 4),
])  # fmt: skip
def test_padding_can_cause_conflicts(kernel, tile, pad, site, degree):
    ch = _change(kernel, tile, pad, site)
    assert ch.after.degree == degree and ch.pair is not None
    a, b = ch.pair.bytes
    assert (a // 4) % 32 == (b // 4) % 32 == ch.pair.bank and a != b


def test_t16_p1_store_pair():
    pair = _change("tiled", 16, 1, "st_As").pair
    # lane 31 writes As[1][15], word 17 + 15 = 32: bank 0 like lane 0's As[0][0]
    assert pair.lanes == (0, 31) and pair.bytes == (0, 128) and pair.bank == 0


def test_block_costs_per_warp_and_step():
    cfg = config("tiled", size=64, tile=32, pad=0)  # 2 k-steps, 32 warps
    costs = ins.block_costs(cfg)
    per = {k: v / (cfg.n_steps * cfg.warps) for k, v in costs.items()}
    # no conflict at T32 P0: the ideal wavefronts are all of them
    assert per == {"ld_inst": 40, "st_inst": 2, "ld_wavefronts": 8 * 2 + 32, "st_wavefronts": 2,
                   "ld_ideal": 8 * 2 + 32, "st_ideal": 2}  # fmt: skip


def test_store_excess_is_l1_fills_as_measured():
    """Without L1 fills (loads via __ldcg, or stored values made in registers) ncu counts the
    bank model's store wavefronts exactly; with them every configuration counts more."""
    counts = store_fills.read()
    assert {c.variant for c in counts} == set(store_fills.VARIANTS) and len(counts) >= 24
    for c in counts:
        kernel = get_kernel(c.kernel)
        small, full = (kernel.configure(c.params, n, n, n) for n in (128, 1024))
        model = ins.block_costs(small)  # a full block costs the same per k-step at any size
        per_inst = model["st_wavefronts"] / model["st_inst"]
        assert c.instructions == model["st_inst"] // small.n_steps * full.n_steps * full.n_blocks
        if c.variant == "plain":
            assert c.per_instruction > per_inst * 1.05, c
        else:
            assert c.per_instruction == pytest.approx(per_inst, rel=1e-3), c
    lo, hi = store_fills.excess_range()
    assert 0.05 < lo < hi < 0.2


# -- the ncu check (matviz/bench/ncu_banks.sh runs it on the GPU) -------------------------------
NCU_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _ncu_csv(values: dict[str, str], header: bool = True) -> str:
    from matviz.bench.ncu_banks import ALL_METRICS as METRICS

    lines = ["==PROF== Connected to process 1", NCU_HEADER] if header else []
    for key, value in values.items():
        lines.append(
            f'"0","1","python3","h","mv_tiled","1","7","(8, 8, 1)","(8, 8, 1)","0","9.0",'
            f'"Command line profiler metrics","{METRICS[key]}","","{value}"'
        )
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("header", [True, False])
def test_ncu_csv_is_read_with_or_without_its_header(tmp_path, header):
    from matviz.bench.ncu_banks import read_ncu_csv

    path = tmp_path / "x.csv"
    path.write_text(_ncu_csv({"ld_inst": "40,960", "st_wavefronts": "5120"}, header))
    assert read_ncu_csv(path) == {"ld_inst": 40960.0, "st_wavefronts": 5120.0}
    assert read_ncu_csv(tmp_path / "missing.csv") == {}


def test_ncu_compare_flags_only_where_the_model_predicts_a_conflict(tmp_path):
    from matviz.bench.ncu_banks import compare_rows, format_table

    index = [
        ("t32p0", "tiled_transposed", {"tile": 32, "pad": 0}),
        ("t32p1", "tiled_transposed", {"tile": 32, "pad": 1}),
        ("none", "tiled", {"tile": 8}),
    ]
    (tmp_path / "index.tsv").write_text(
        "".join(f"{tag}\t{k}\t{json.dumps(p)}\tmv_{k}\n" for tag, k, p in index)
    )
    # both measured at 1.5 wavefronts per STS and 1 per LDS
    for tag in ("t32p0", "t32p1"):
        fake = {"ld_inst": "100", "ld_wavefronts": "100", "st_inst": "10", "st_wavefronts": "15"}
        (tmp_path / f"{tag}.csv").write_text(_ncu_csv(fake))
    rows = {r["tag"]: r for r in compare_rows(tmp_path, 64, jobs=1)}
    assert rows["t32p0"]["degree_st"] > 1 and rows["t32p1"]["degree_st"] == 1
    assert rows["t32p0"]["st_flag"] and not rows["t32p1"]["st_flag"]  # +50%, but no conflict
    assert rows["t32p1"]["st_diff"] == pytest.approx(0.5) and not rows["t32p1"]["ld_flag"]
    assert rows["none"]["ld_measured"] is None
    table = format_table(list(rows.values()), 64)
    assert "FLAG st" in table and "flagged: t32p0" in table and "no ncu data for: none" in table


def test_ncu_compare_reads_cp_async_stores_from_the_ldgsts_counters(tmp_path):
    from matviz.bench.ncu_banks import compare_rows, format_table

    params = {"BM": 64, "BN": 64, "BK": 16, "STAGES": 2, "pad": 0, "swizzle": 0}
    (tmp_path / "index.tsv").write_text(
        f"x0\tasync_pipeline\t{json.dumps(params)}\tmv_async_pipeline\t1\n"
    )
    # no STS at all; LDGSTS: 50 instructions, 60 conflicts; shared memory's wavefronts in
    # all 400, of which the loads' 200
    fake = {"ld_inst": "100", "ld_wavefronts": "200", "st_inst": "0", "st_wavefronts": "0",
            "ldgsts_inst": "50", "ldgsts_conflicts": "60", "all_wavefronts": "400"}  # fmt: skip
    (tmp_path / "x0.csv").write_text(_ncu_csv(fake))
    (row,) = compare_rows(tmp_path, 64, jobs=1)
    assert row["copies"] and row["st_inst_measured"] == 50
    assert row["st_measured"] == pytest.approx(200 / 50)  # the rest of the wavefronts
    assert row["copy_conflicts_measured"] == pytest.approx(60 / 50)
    assert row["st_conflicts_per_inst"] > 0  # BK=16 without a swizzle: the model's 4-way
    assert "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts" in format_table([row], 64)


def test_ncu_compare_counts_ldmatrix_and_subtracts_the_epilogue(tmp_path):
    """Kernel 09: ncu counts LDSM apart from LDS but its wavefronts among the loads'; the same
    launch with K = 0 (``tag.k0.csv``: C staged through shared memory) is subtracted."""
    from matviz.bench.ncu_banks import compare_rows

    params = {"BM": 64, "BN": 64, "BK": 16, "WT": 32, "PAD": 8}
    (tmp_path / "index.tsv").write_text(f"w\twmma\t{json.dumps(params)}\tmv_wmma\t0\t1\n")
    # the k loop: 1000 LDSM of 4 wavefronts, 200 STS.128 of 6; the epilogue: 64 LDS of 2 and
    # 32 STS of 1, in both launches
    full = {"ld_inst": "64", "ldsm_inst": "1000", "ld_wavefronts": str(4000 + 128),
            "st_inst": str(200 + 32), "st_wavefronts": str(1200 + 32)}  # fmt: skip
    epilogue = {"ld_inst": "64", "ld_wavefronts": "128", "st_inst": "32", "st_wavefronts": "32"}
    (tmp_path / "w.csv").write_text(_ncu_csv(full))
    (tmp_path / "w.k0.csv").write_text(_ncu_csv(epilogue))
    (row,) = compare_rows(tmp_path, 64, jobs=1)
    assert row["ld_inst_measured"] == 1000 and row["ld_measured"] == pytest.approx(4.0)
    assert row["st_inst_measured"] == 200 and row["st_measured"] == pytest.approx(6.0)
    assert row["ld_per_inst"] == pytest.approx(4.0) and row["st_per_inst"] == pytest.approx(6.0)
    assert row["ld_diff"] == pytest.approx(0.0) and not row["ld_flag"]
    # without the epilogue launch the loads would read 4.128: the LDS of C counted with them
    (tmp_path / "w.k0.csv").unlink()
    (row,) = compare_rows(tmp_path, 64, jobs=1)
    assert row["ld_measured"] == pytest.approx(4128 / 1064)


@pytest.mark.parametrize(("swizzle", "degree"), [(1, 1), (0, 4)])
def test_cp_async_stores_are_ldgsts(swizzle, degree):
    # kernel 07 copies A element by element (its transposing stores, conflict-free with the
    # swizzle, 4-way without at BK=16) and B in 16 bytes: cp.async, not a load then an STS
    config = get_kernel("async_pipeline").configure({"swizzle": swizzle}, 1024, 1024, 1024)
    rec = access.access_records(config, 0, (0, 0), 0)
    summary = {s.site: s for s in ins.summarise(config, ins.instructions(config, rec))}
    assert (summary["st_As"].opcode, summary["st_As"].count) == ("LDGSTS", 8)
    assert summary["st_As"].degree == degree
    assert (summary["st_Bs"].opcode, summary["st_Bs"].count) == ("LDGSTS.128", 2)
    assert summary["ld_As"].opcode == "LDS.128"


def test_only_a_store_with_a_source_can_be_an_async_copy():
    from matviz.core.kernel import Site

    with pytest.raises(ValueError, match="async copy"):
        Site("ld", "load", "As", "compute", at=lambda th, p: (0, 0), async_copy=True)
    with pytest.raises(ValueError, match="async copy"):
        Site("st", "store", "As", "load", at=lambda th, p: (0, 0), async_copy=True)


def test_the_bundled_cp_async_conflicts_are_read_and_a_broken_table_is_no_data(tmp_path):
    measured = store_fills.copy_conflicts()
    pipeline = [(m, n) for tag, m, n in measured if tag.startswith("07_async_pipeline_")]
    assert len(pipeline) >= 3 and any(model == 0 for model, _ in pipeline)
    assert all(ncu > model for model, ncu in pipeline)  # ncu counts more for every layout
    # kernel 10's 16-byte copies that bypass L1: none in ncu, none in the model, in every
    # configuration (BM 256's measured 2026-12-07)
    mma = [(m, n) for tag, m, n in measured if tag.startswith("10_mma_pipeline_")]
    configurations = get_kernel("mma_pipeline").configurations()
    assert len(mma) == len(configurations) and all(m == n == 0 for m, n in mma)
    header = "| configuration | LDGSTS conflicts per instruction, model | ncu |\n"
    for text in ("", header + "| a | b |", header + "| x | 1 | ? |"):
        path = tmp_path / "t.md"
        path.write_text(text)
        assert store_fills.copy_conflicts.__wrapped__(path) == ()
    assert store_fills.copy_conflicts.__wrapped__(tmp_path / "missing.md") == ()


@pytest.mark.parametrize("name", sorted(kernels()))
def test_bank_costs_of_all_instructions_at_once_equal_each_alone(name: str) -> None:
    """instructions() costs every instruction in one banks call per width: the n-way conflict
    and wavefronts must be what each instruction's own offsets give."""
    kernel = kernels()[name]
    for params in kernel.configurations():
        config = kernel.configure(params, 1000, 777, 333, check=False)
        warp = config.warps - 1
        for ins_ in ins.instructions(config, access.access_records(config, warp, (1, 0), 1)):
            assert ins_.conflict_degree == int(banks.conflict_degree(ins_.offsets, ins_.width))
            assert ins_.wavefronts == int(banks.wavefronts(ins_.offsets, ins_.width))


def test_the_same_records_make_the_same_instructions_once():
    """Playback asks for a k-step's instructions several times, and a ring of slots repeats its
    accesses every STAGES steps: equal records give the kept instructions, other records their
    own."""
    cfg = config("async_pipeline")
    stages = cfg.params["STAGES"]
    rec = access.access_records(cfg, 1, (1, 1), 2)
    first = ins.instructions(cfg, rec)
    again = ins.instructions(cfg, access.access_records(cfg, 1, (1, 1), 2 + stages))
    assert [i.site for i in again] == [i.site for i in first]
    assert all(a is b for a, b in zip(again, first, strict=True))  # kept, not rebuilt
    other = rec.copy()
    other["offsets"][0] = (other["offsets"][0] + 4) % 2048  # one access moved a word
    moved = ins.instructions(cfg, other)
    assert not np.array_equal(moved[0].offsets, first[0].offsets)
    assert np.array_equal(moved[0].offsets, other["offsets"][0])
