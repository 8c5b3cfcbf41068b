"""How far the simulator is from the GPU, configuration by configuration, said with every
simulated trace (sim_fit --validate)."""

from __future__ import annotations

import json
import os

import pytest

from matviz.backends import sim_fit
from matviz.backends.contract import RunRequest
from matviz.backends.devices import DEVICE_DIR, load_device
from matviz.backends.simulator import simulate
from matviz.core.explain import trace_facts
from matviz.core.registry import configure, kernels
from matviz.core.summary import summary_lines
from matviz.errors import MatvizError
from matviz.paths import RESOURCE_DIR
from matviz.toolchain.code_digest import level0_digest
from matviz.toolchain.nvcc import nvcc_path

# a row counts only if it timed today's code, which nvcc tells
pytestmark = pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not on PATH")


def _rows(times: list[float], code: bool = True) -> list[dict]:
    """Benchmark rows of tiled at 256³ whose measured times are ``times`` x the simulated (of
    today's code, or with ``code`` False of an earlier version)."""
    rows = []
    for tile, factor in zip((16, 32), times, strict=True):
        params = {"tile": tile, "pad": 0}
        sim = simulate(RunRequest("tiled", 256, 256, 256, params=params, level=0, seed=0))
        ms = sim.manifest["stats"]["time_ms_median"] * factor
        row = {"kernel": "tiled", "label": f"T{tile}", "params": params, "size": 256, "ms": ms}
        today = level0_digest(configure("tiled", params, 256, 256, 256))
        rows.append(row | {"code": today if code else "0123456789abcdef"})
    return rows


def _cases(rows: list[dict]) -> list[sim_fit.Case]:
    return [sim_fit.Case(r["label"], r["kernel"], r["params"], (256,) * 3, r["ms"],
                         code=r.get("code")) for r in rows]  # fmt: skip


def test_each_kernel_gets_its_share_within_the_tolerance_and_its_rate_ratios():
    entry = sim_fit.validation(_cases(_rows([1.0, 2.0])), load_device("h200"), "rows.json",
                               "2026-12-06")  # fmt: skip
    tiled = entry["kernels"]["tiled"]
    # the second took twice the simulated time: the model ran it at twice its measured rate
    assert tiled == {"configurations": 2, "within": 1, "ratio_min": 1.0, "ratio_median": 1.5,
                     "ratio_max": 2.0, "earlier_code": 0}  # fmt: skip
    assert entry["size"] == 256 and entry["tolerance"] == 0.25 and entry["source"] == "rows.json"


def test_only_timings_of_todays_code_are_compared():
    device = load_device("h200")
    earlier = _rows([1.0, 3.0], code=False)
    no_digest = [{k: v for k, v in row.items() if k != "code"} for row in _rows([3.0, 3.0])]
    mixed = _rows([1.0, 2.0])[:1] + earlier[1:]
    assert sim_fit.validation(_cases(earlier + no_digest), device, "x")["kernels"]["tiled"] == {
        "configurations": 0, "within": 0, "earlier_code": 4}
    tiled = sim_fit.validation(_cases(mixed), device, "x")["kernels"]["tiled"]
    assert tiled["configurations"] == 1 and tiled["earlier_code"] == 1
    assert tiled["ratio_max"] == 1.0  # the 3x of the earlier code is not in it


def test_a_kernel_checked_only_against_earlier_code_says_so(tmp_path, capsys):
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps(_rows([1.0, 2.0], code=False)))
    device = tmp_path / "gpu.json"
    device.write_text((DEVICE_DIR / "h200.json").read_text())
    assert sim_fit.main(["--device", str(device), "--validate", str(rows)]) == 0
    assert "none of today's code; 2 timed earlier code" in capsys.readouterr().out
    trace = simulate(RunRequest("tiled", 128, 128, 128, {"tile": 16}, level=1), device=device)
    facts = " ".join(trace_facts(trace))
    assert "Checked against" not in facts
    assert "Not yet checked against this kernel's code as it is: the 2 configurations" in facts
    assert any("not yet checked against today's code of tiled: the 2 configurations" in line
               for line in summary_lines(trace))  # fmt: skip


def test_validate_writes_the_check_and_a_simulated_trace_states_it(tmp_path, capsys):
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps(_rows([1.0, 2.0])))
    device = tmp_path / "gpu.json"
    device.write_text((DEVICE_DIR / "h200.json").read_text())
    assert sim_fit.main(["--device", str(device), "--validate", str(rows), "--dry-run"]) == 0
    assert "1 of 2" in capsys.readouterr().out and "rows.json" not in device.read_text()
    assert sim_fit.main(["--device", str(device), "--validate", str(rows)]) == 0
    checked = load_device(device)["model"]["validation"]
    trace = simulate(RunRequest("tiled", 128, 128, 128, {"tile": 16}, level=1), device=device)
    assert trace.manifest["details"]["model"]["validation"] == checked
    facts = " ".join(trace_facts(trace))
    assert "Checked against 2 configurations of this kernel" in facts
    assert "within 25% in 1" in facts and "1.00× to 2.00×" in facts
    assert any(line.startswith("model      checked against 2") for line in summary_lines(trace))
    # a kernel the check did not cover says nothing
    naive = simulate(RunRequest("naive", 64, 64, 64, {"tile": 16}, level=1), device=device)
    assert "Checked against" not in " ".join(trace_facts(naive))


def test_a_refit_drops_the_check_of_the_constants_before(tmp_path):
    device = load_device("h200")
    device["model"]["validation"] = {"kernels": {}}
    cases = [sim_fit.Case("T16", "tiled", {"tile": 16, "pad": 0}, (256,) * 3, 0.01)]
    fitted = sim_fit.fit(cases, device, ("load_latency_ns",), source="test")
    assert "validation" not in fitted["model"]


@pytest.mark.parametrize(
    "text",
    ["", "[]", "{", "[{}]", '[{"kernel": "tiled", "label": "x", "params": {}, "size": 256}]',
     '[{"kernel": "tiled", "label": "x", "params": {}, "size": 256, "ms": 0}]',
     '[{"kernel": "tiled", "label": "x", "params": {}, "size": 256, "ms": 1e999}]',
     '[{"kernel": "tiled", "label": "x", "params": {}, "size": "big", "ms": 1}]',
     '[{"kernel": "tiled", "label": "x", "params": {}, "size": 256, "ms": 1, "code": 5}]'],
)  # fmt: skip
def test_a_malformed_benchmark_is_one_line(tmp_path, capsys, text):
    rows = tmp_path / "rows.json"
    rows.write_text(text)
    with pytest.raises(MatvizError):
        sim_fit.configuration_cases(rows)
    assert sim_fit.main(["--validate", str(rows), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("matviz: error:") and "\n" not in err


def test_a_benchmark_that_is_not_a_file_is_one_line(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.json")  # reading it would block
    (tmp_path / "folder.json").mkdir()
    for name in ("pipe.json", "folder.json", "absent.json"):
        assert sim_fit.main(["--validate", str(tmp_path / name), "--dry-run"]) == 2
        err = capsys.readouterr().err.strip()
        assert "a JSON file of at most 64 MB is needed" in err and "\n" not in err


def test_the_shipped_check_counts_the_bundled_timings_of_todays_code():
    """Change a kernel's level-0 code and this fails until `sim_fit --validate` is run again:
    the check a simulated trace states must be against the code it simulates."""
    checked = load_device("h200")["model"]["validation"]
    assert set(checked["kernels"]) == set(kernels()) and checked["size"] == 4096
    cases = sim_fit.configuration_cases(RESOURCE_DIR / "bench" / checked["source"])
    for name, entry in checked["kernels"].items():
        mine = [c for c in cases if c.kernel == name]
        today = sum(map(sim_fit.timed_todays_code, mine))
        assert (entry["configurations"], entry["earlier_code"]) == (today, len(mine) - today), name
        assert 0 <= entry["within"] <= entry["configurations"]
        if entry["configurations"]:
            assert entry["ratio_min"] <= entry["ratio_median"] <= entry["ratio_max"]
