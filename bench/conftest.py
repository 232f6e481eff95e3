"""pytest-benchmark glue for the lucid bench suite.

* lets the OpenMP runtimes use max(LUCID_BENCH_THREADS) threads; every case
  then sets lucid and torch to its own thread count (1 or 2 by default) and
  the header prints what each library reports back for every count;
* after the run, prints per group each peer's median as a ratio to lucid's
  median *in the same run*, whether lucid's speed targets are met, and a
  compact table of every miss.

Nothing here fails a run on timing.  With --benchmark-disable (the CI smoke
run) no timings exist and the summary prints a single line.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # so `import _lucid_bench` works under any --import-mode
    sys.path.insert(0, _HERE)

from _lucid_bench import (FULL, OPS_1E7, THREAD_SET, THREADS, import_lucid,  # noqa: E402
                          pin_threads)

# OpenMP/BLAS runtimes read these once, at first use: set them before torch or
# lucid are imported.  An explicit setting in the environment wins.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))

import pytest  # noqa: E402

# The core issue's targets, as limits on lucid_median / peer_median for one group.
#   (group, peer, limit, wording)
TARGETS = [
    ("exp-1-float32-fwd-t1", "numpy", 1.5, "1-elem f32 exp <= 1.5x np.exp"),
    ("exp-1-float32-fwd_rg-t1", "torch", 0.5, "1-elem f32 exp, requires_grad <= 0.5x torch.exp"),
    ("erf-1-float32-fwd_bwd-t1", "torch", 1 / 5,
     "1-elem f32 erf(x).sum().backward() >= 5x faster than torch"),
    ("erf-1e5-float32-fwd-t1", "torch", 1.1, "1e5 f32 erf fwd <= 1.1x torch (1 thread)"),
    ("erf-1e5-float32-fwd-t1", "scipy", 1 / 15,
     "1e5 f32 erf fwd >= 15x faster than scipy.special.erf"),
    # the gpu device (bench/test_gpu_bench.py): lucid's overhead on top of raw MLX
    ("gpu-chain20-100-float32-fwd_bwd", "mlx", 2.0,
     "gpu: 20-op chain forward+backward (small tensors) < 2x raw MLX (mx.grad)"),
] + [(f"gpu-{op}-{n}-float32", "mlx", 1.1, f"gpu: {op} of {n} elements < 1.1x raw MLX")
     for op in ("exp", "tanh", "mul") for n in ("1e+05", "1e+06")]

# Targets on what a route to lucid's op costs, as limits on peer median / lucid median
# (the peer is the same op reached another way, e.g. through NumPy's protocols).
#   (group, peer, limit, wording)
ROUTE_TARGETS = [
    ("np_exp-1-float32-fwd-t1", "via_numpy", 2.0, "np.exp(t), 1 element, <= 2x lucid.exp(t)"),
    ("np_exp-1-float32-fwd_rg-t1", "via_numpy", 2.0,
     "np.exp(t), 1 element, requires_grad, <= 2x lucid.exp(t)"),
    ("np_exp-1e5-float32-fwd-t1", "via_numpy", 1.05, "np.exp(t), 1e5 elements, within 5%"),
    ("np_exp-1e5-float32-fwd_rg-t1", "via_numpy", 1.05,
     "np.exp(t), 1e5 elements, requires_grad, within 5%"),
]

# The CPU-math issue's targets, as rules over every group of the run:
#   (rule id, peer, limit on lucid/peer, applies(meta), wording)
RULES = [
    ("torch", "torch", 1.0, lambda m: m.get("mode") in ("fwd", "fwd_rg"),
     "forward at least as fast as torch on the same threads"),
    ("numpy", "numpy", 1.0, lambda m: m.get("mode") == "fwd",
     "forward at least as fast as numpy where numpy has the function"),
    ("copy", "copy", 1.3, lambda m: m.get("mode") == "fwd" and int(m.get("size", 0)) >= 10**7,
     "1e7 forward within 1.3x of a plain copy (x.copy()) of the same bytes"),
    ("scipy15", "scipy", 1 / 15,
     lambda m: m.get("op") in ("erf", "erfc") and m.get("mode") == "fwd"
     and int(m.get("size", 0)) >= 10**3,
     "erf/erfc (n >= 1e3) >= 15x faster than scipy.special"),
    ("bwd", "torch", 1.0, lambda m: m.get("mode") == "fwd_bwd",
     "op(x).sum().backward() at least as fast as torch's"),
]

PEER_COLUMNS = ["numpy", "scipy", "torch", "copy", "mlx"]
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
    lines = ["lucid bench threads (lucid and torch set alike per case, read back): "
             + ", ".join(f"{k}: {v}" for k, v in _thread_info.items()),
             f"lucid bench matrix: {'FULL' if FULL else 'default'} "
             f"(thread counts {THREAD_SET}; 1e7 ops: {'all' if FULL else ','.join(OPS_1E7)}; "
             "LUCID_BENCH_FULL=1 for every op/size/thread count)"]
    warn = _load_warning()
    if warn:
        lines.append("lucid bench: " + warn)
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
    """{group: {"meta": extra_info, "threads_seen": {...}, peer: median seconds}}."""
    groups: dict = {}
    for bench in getattr(bs, "benchmarks", None) or []:
        try:
            if not bench or bench.has_error:
                continue
            info = dict(bench.extra_info or {})
            peer = info.get("peer") or (bench.params or {}).get("peer_name")
            if not peer or not bench.group:
                continue
            g = groups.setdefault(bench.group, {"meta": info, "threads_seen": set()})
            g[peer] = float(bench.stats.median)
            if "threads" in info:
                g["threads_seen"].add((info.get("threads"), info.get("lucid_threads"),
                                       info.get("torch_threads")))
        except Exception:  # never let the summary break a run
            continue
    return groups


_NON_PEER = {"meta", "threads_seen", "lucid"}


def _group_key(item):
    name, g = item
    m = g["meta"]
    return (str(m.get("op", name)), int(m.get("size", 0)), str(m.get("dtype", "")),
            MODE_ORDER.get(m.get("mode"), 9), int(m.get("threads", 0) or 0), name)


def _evaluate_rules(groups):
    """[(rule, wording, limit, [(group, meta, lucid, peer_t, ratio, ok)])] per RULES."""
    out = []
    for rule, peer, limit, applies, wording in RULES:
        rows = []
        for name, g in sorted(groups.items(), key=_group_key):
            m = g["meta"]
            try:
                if not applies(m):
                    continue
            except Exception:
                continue
            lucid, other = g.get("lucid"), g.get(peer)
            if lucid is None or other is None:
                continue
            r = lucid / other
            rows.append((name, m, lucid, other, r, r <= limit))
        out.append((rule, peer, wording, limit, rows))
    return out


def _load_warning():
    """A line when other processes compete for the cores (multi-thread ratios suffer most)."""
    try:
        load1, load5, _ = os.getloadavg()
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    except (OSError, AttributeError):
        return None
    if max(load1, load5) > 1.25 * (cores or 1):
        return (f"WARNING: load average {load1:.1f}/{load5:.1f} (1/5 min) on {cores} cores: "
                "other processes compete for the CPUs; timings, above all the multi-thread "
                "ones, are unreliable")
    return None


def _write_summary(tr, bs):
    tr.write_sep("=", "lucid vs peers (same run, medians)")
    tr.write_line("threads: " + ", ".join(f"{k}: {v}" for k, v in _thread_info.items()))
    warn = _load_warning()
    if warn:
        tr.write_line(warn, red=True)
    groups = _collect(bs)
    if not groups:
        tr.write_line("no timings recorded.")
        return
    peers = [p for p in PEER_COLUMNS if any(p in g for g in groups.values())]
    peers += sorted({p for g in groups.values() for p in g} - set(peers) - _NON_PEER)
    tr.write_line("cells: peer median / lucid median  (>1 = lucid faster); "
                  "'=t' = absolute peer time when lucid has no timing; "
                  "group = op-size-dtype-mode-t<threads>")
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

    # Thread counts as the libraries reported them, per case.
    seen = sorted({t for g in groups.values() for t in g["threads_seen"]}, key=str)
    if seen:
        tr.write_line("")
        tr.write_line("thread counts seen (asked -> lucid reported, torch reported): "
                      + "; ".join(f"{a} -> {lu}, {to}" for a, lu, to in seen))
        bad = [s for s in seen if isinstance(s[1], int) and isinstance(s[2], int)
               and not (s[0] == s[1] == s[2])]
        if bad:
            tr.write_line("  WARNING: lucid and torch did not run on the asked thread count "
                          f"in {bad}; those ratios are not like for like", red=True)

    tr.write_line("")
    tr.write_line("core issue targets (limit on lucid median / peer median):")
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

    tr.write_line("")
    tr.write_line("routes to lucid's ops (limit on peer median / lucid median):")
    for group, peer, limit, wording in ROUTE_TARGETS:
        g = groups.get(group, {})
        lucid, other = g.get("lucid"), g.get(peer)
        if lucid is None or other is None:
            tr.write_line(f"  [ n/a ] {wording}: not measured in this run")
            continue
        r = other / lucid
        ok = r <= limit
        floor = g.get("np_floor")
        tr.write_line(f"  [{' MET' if ok else 'MISS'} ] {wording}: lucid={_fmt_time(lucid)} "
                      f"{peer}={_fmt_time(other)} -> {peer}/lucid={r:.3g} (limit {limit:.3g})"
                      + (f"; NumPy's dispatch alone {floor / lucid:.3g}x lucid" if floor else ""),
                      red=not ok, green=ok)

    evaluated = _evaluate_rules(groups)
    tr.write_line("")
    tr.write_line("CPU-math issue targets (every group they apply to):")
    misses = []
    for rule, peer, wording, limit, rows in evaluated:
        met = sum(1 for r in rows if r[5])
        if not rows:
            tr.write_line(f"  [ n/a ] {rule}: {wording}: no group measured")
            continue
        ok = met == len(rows)
        worst = max(rows, key=lambda r: r[4])
        tr.write_line(f"  [{' MET' if ok else 'MISS'} ] {rule}: {wording} (lucid/{peer} <= "
                      f"{limit:.3g}): {met}/{len(rows)} groups met; worst {worst[0]} "
                      f"{worst[4]:.3g}", red=not ok, green=ok)
        misses += [(rule, peer, limit) + r for r in rows if not r[5]]

    tr.write_sep("=", f"lucid bench: {len(misses)} target misses")
    if not misses:
        return
    hdr = (f"{'rule':<8}{'op':<12}{'size':>5}{'dtype':>6}{'mode':>9}{'thr':>4}"
           f"{'lucid':>10}{'peer':>7}{'peer_t':>10}{'ratio':>10}{'limit':>8}")
    tr.write_line(hdr)
    tr.write_line("-" * len(hdr))
    for rule, peer, limit, name, m, lucid, other, r, _ in misses:
        tr.write_line(f"{rule:<8}{str(m.get('op')):<12}{str(m.get('size_label', m.get('size'))):>5}"
                      f"{str(m.get('dtype')).replace('float', 'f'):>6}"
                      f"{str(m.get('mode')):>9}{str(m.get('threads')):>4}"
                      f"{_fmt_time(lucid):>10}{peer:>7}{_fmt_time(other):>10}"
                      f"{r:>10.3g}{limit:>8.3g}")
    path = os.environ.get("LUCID_BENCH_MISSES")
    if path:
        import json
        with open(path, "w") as fh:
            json.dump([dict(rule=rule, op=m.get("op"), size=m.get("size"), dtype=m.get("dtype"),
                            mode=m.get("mode"), threads=m.get("threads"), peer=peer,
                            lucid_s=lucid, peer_s=other, ratio=r, limit=limit)
                       for rule, peer, limit, name, m, lucid, other, r, _ in misses], fh, indent=1)
        tr.write_line(f"misses written to {path}")


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
