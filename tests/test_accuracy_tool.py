"""tools/accuracy_binary.py runs end to end and writes a sane table (a tiny --n on one
op; the full measurement is docs/accuracy_binary.md)."""
import json
import os
import subprocess
import sys

import pytest

import lucid

pytest.importorskip("mpmath")

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tools")


def test_accuracy_binary_tiny_run(tmp_path):
    out = tmp_path / "acc.md"
    # From a temporary directory, so the source tree does not shadow the installed
    # package (the script puts the checkout first only when it is built in place).
    proc = subprocess.run(
        [sys.executable, os.path.join(TOOLS, "accuracy_binary.py"), "--n", "3000",
         "--ops", "hypot", "--jobs", "1", "--retries", "1", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"lucid: {os.path.realpath(lucid.__file__)}\n" in proc.stderr, (
        "the script measured another lucid than the one the tests import", proc.stderr)

    res = json.loads((tmp_path / "acc.json").read_text())["results"]
    assert [(r["op"], r["dtype"]) for r in res] == [("hypot", "float32"), ("hypot", "float64")]
    for r in res:
        assert r["n"] == 3000
        assert r["n_mismatch"] == 0
        assert 0 < r["mean_ulp"] < r["max_ulp"] <= 4    # glibc-class hypot: about 1 ULP
        assert r["n_ref"] > 0                           # the non-finite special pairs

    md = out.read_text()
    assert md.startswith("# lucid binary element-wise accuracy")
    assert "| op | float32 max ULP | float32 worst (a, b) | float32 mean ULP | float64 max ULP" in md
    row = [line for line in md.splitlines() if line.startswith("| hypot |")][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == 8 and cells[-1] == "3,000"
    assert float(cells[1]) == pytest.approx(res[0]["max_ulp"], rel=1e-2)
    assert md.rstrip().endswith("## Over 4 ULP\n\nNone.")
