"""pytest-benchmark glue for the lucid bench suite.

* pins every library to LUCID_BENCH_THREADS (default 1) threads and prints it;
* after the run, prints per group each peer's median as a ratio to lucid's
  median *in the same run*, and whether the issue's targets are met.

Nothing here fails a run on timing.  With --benchmark-disable (the CI smoke
run) no timings exist and the summary prints a single line.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # so `import _lucid_bench` works under any --import-mode
    sys.path.insert(0, _HERE)

from _lucid_bench import THREADS, import_lucid, pin_threads  # noqa: E402

# OpenMP/BLAS runtimes read these once, at first use: set them before torch or
# lucid are imported.  An explicit setting in the environment wins.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))

import pytest  # noqa: E402

# The targets, as limits on lucid_median / peer_median for one group.
#   (group, peer, limit, wording)
TARGETS = [
    ("exp-1-float32-fwd", "numpy", 1.5, "1-elem f32 exp <= 1.5x np.exp"),
    ("exp-1-float32-fwd_rg", "torch", 0.5, "1-elem f32 exp, requires_grad <= 0.5x torch.exp"),
    ("erf-1-float32-fwd_bwd", "torch", 1 / 5, "1-elem f32 erf(x).sum().backward() >= 5x faster than torch"),
    ("erf-1e5-float32-fwd", "torch", 1.1, "1e5 f32 erf fwd <= 1.1x torch (1 thread)"),
    ("erf-1e5-float32-fwd", "scipy", 1 / 15, "1e5 f32 erf fwd >= 15x faster than scipy.special.erf"),
]

PEER_COLUMNS = ["numpy", "scipy", "torch", "mlx"]
MODE_ORDER = {"fwd": 0, "fwd_rg": 1, "fwd_bwd": 2}

_thread_info: dict = {}


# Sub-microsecond ops need many calls per timed round, or the timer's own cost
# (~0.1-0.5us) swamps them and squeezes every ratio towards 1.  pytest-benchmark's
# defaults (5us rounds, no warmup) calibrate from one cold call and often settle
# on 1 call per round; these defaults apply unless given on the command line.
_TIMING_DEFAULTS = {
    "--benchmark-min-time": ("benchmark_min_time", "0.0001"),          # 100us rounds
    "--benchmark-warmup": ("benchmark_warmup", "on"),
    "--benchmark-warmup-iterations": ("benchmark_warmup_iterations", "1000"),
}


def _apply_timing_defaults(config):
    try:
        from pytest_benchmark.utils import parse_seconds, parse_warmup
    except ImportError:
        return
    given = list(config.invocation_params.args)
    given += os.environ.get("PYTEST_ADDOPTS", "").split()
    try:
        given += list(config.getini("addopts"))
    except (ValueError, KeyError):
        pass
    parse = {"benchmark_min_time": parse_seconds, "benchmark_warmup": parse_warmup,
             "benchmark_warmup_iterations": int}
    for flag, (dest, value) in _TIMING_DEFAULTS.items():
        if any(str(a) == flag or str(a).startswith(flag + "=") for a in given):
            continue
        if hasattr(config.option, dest):
            setattr(config.option, dest, parse[dest](value))


def pytest_configure(config):
    # Runs before pytest-benchmark's own (trylast) pytest_configure reads options.
    _apply_timing_defaults(config)
    _thread_info.clear()
    _thread_info.update(pin_threads())


def pytest_report_header(config):
    lucid, err = import_lucid()
    lines = ["lucid bench threads: " + ", ".join(f"{k}={v}" for k, v in _thread_info.items())]
    if lucid is None:
        lines.append(f"lucid bench: lucid NOT importable ({err}); lucid cases will skip")
    else:
        lines.append(f"lucid bench: lucid from {os.path.dirname(lucid.__file__)}")
    return lines


# ----------------------------------------------------------------- summary hook


def _fmt_time(sec):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if sec >= scale:
            return f"{sec / scale:.3g}{unit}"
    return f"{sec / 1e-9:.3g}ns"


def _collect(bs):
    """{group: {"meta": extra_info, peer: median seconds}} from the benchmark session."""
    groups: dict = {}
    for bench in getattr(bs, "benchmarks", None) or []:
        try:
            if not bench or bench.has_error:
                continue
            info = dict(bench.extra_info or {})
            peer = info.get("peer") or (bench.params or {}).get("peer_name")
            if not peer or not bench.group:
                continue
            g = groups.setdefault(bench.group, {"meta": info})
            g[peer] = float(bench.stats.median)
        except Exception:  # never let the summary break a run
            continue
    return groups


def _group_key(item):
    name, g = item
    m = g["meta"]
    return (str(m.get("op", name)), MODE_ORDER.get(m.get("mode"), 9), str(m.get("dtype", "")),
            int(m.get("size", 0)), name)


def _write_summary(tr, bs):
    tr.write_sep("=", "lucid vs peers (same run, medians)")
    tr.write_line("threads: " + ", ".join(f"{k}={v}" for k, v in _thread_info.items()))
    groups = _collect(bs)
    if not groups:
        tr.write_line("no timings recorded.")
        return
    peers = [p for p in PEER_COLUMNS if any(p in g for g in groups.values())]
    peers += sorted({p for g in groups.values() for p in g} - set(peers) - {"meta", "lucid"})
    tr.write_line("cells: peer median / lucid median  (>1 = lucid faster); "
                  "'=t' = absolute peer time when lucid has no timing")
    width = max(len(n) for n in groups) + 2
    header = f"{'group':<{width}}{'lucid':>10}" + "".join(f"{p:>12}" for p in peers)
    tr.write_line(header)
    tr.write_line("-" * len(header))
    for name, g in sorted(groups.items(), key=_group_key):
        lucid = g.get("lucid")
        row = f"{name:<{width}}{_fmt_time(lucid) if lucid else '-':>10}"
        for p in peers:
            t = g.get(p)
            if t is None:
                cell = "-"
            elif lucid:
                cell = f"{t / lucid:.3g}x"
            else:
                cell = "=" + _fmt_time(t)
            row += f"{cell:>12}"
        tr.write_line(row)

    tr.write_line("")
    tr.write_line("issue targets (limit on lucid median / peer median):")
    for group, peer, limit, wording in TARGETS:
        g = groups.get(group, {})
        lucid, other = g.get("lucid"), g.get(peer)
        if other is None:
            tr.write_line(f"  [ n/a ] {wording}: {peer} not measured in this run")
        elif lucid is None:
            tr.write_line(f"  [ n/a ] {wording}: lucid not measured; "
                          f"{peer}={_fmt_time(other)} -> lucid budget {_fmt_time(other * limit)}")
        else:
            r = lucid / other
            ok = r <= limit
            msg = (f"  [{' MET' if ok else 'MISS'} ] {wording}: lucid={_fmt_time(lucid)} "
                   f"{peer}={_fmt_time(other)} -> lucid/{peer}={r:.3g} (limit {limit:.3g})")
            if not ok:
                msg += f", needs {100 * (1 - limit / r):.0f}% less time"
            tr.write_line(msg, red=not ok, green=ok)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    bs = getattr(config, "_benchmarksession", None)
    if bs is None or config.getoption("collectonly", False):
        return
    if getattr(bs, "disabled", False) or getattr(bs, "skip", False):
        terminalreporter.write_line("lucid bench: timing disabled; no ratios computed.")
        return
    try:
        _write_summary(terminalreporter, bs)
    except Exception as exc:  # reporting must never turn a run red
        terminalreporter.write_line(f"lucid bench: summary failed: {exc!r}")
