#!/usr/bin/env python3
"""Joins ge2_bench's and torch_bench.py's JSON lines into one markdown report.

Usage: report.py [--commit SHA] [--date YYYY-MM-DD] FILE...

Every line of every FILE that is a JSON object with "impl" counts; other
lines (logs) are skipped. One table per workload, then the targets of
tracker issue 7 with pass/FAIL, printed last. Ratios are ge2 / PyTorch, so
below 1 means ge2 is faster or smaller; each compares rows of the same
precision (fp32 with fp32, TF32 with TF32).
"""
import argparse
import datetime
import json
import math
import sys

WORKLOAD_ORDER = ["mlp_small", "mlp_medium", "mlp_large", "epoch", "epoch_loop", "cnn64", "cnn256", "cnn_epoch",
                  "cnn_epoch_loop"]
ROW_ORDER = [("ge2", "replay"), ("ge2", "eager"), ("torch", "graph"), ("torch", "eager")]
MIB = 1 << 20


def load(paths):
    env, rows = [], []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not isinstance(obj, dict) or "impl" not in obj:
                    continue
                (env if obj.get("env") else rows).append(obj)
    return env, rows


def precision_of(r):
    """A row's precision: its "precision" field, or for older rows its tf32 flag."""
    return r.get("precision") or ("tf32" if r.get("tf32") else "fp32")


def find(rows, workload, impl, mode, precision="fp32"):
    """The row of (workload, impl, mode, precision); precision may be a tf32 flag (True: "tf32")."""
    if isinstance(precision, bool):
        precision = "tf32" if precision else "fp32"
    for r in rows:
        if (r.get("workload"), r.get("impl"), r.get("mode"), precision_of(r)) == (workload, impl, mode, precision):
            return r
    return None


def ok(r):
    return r is not None and "error" not in r


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def fmt(v, digits=1):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def fmt_host(r):
    """Host µs inside the step; where the row reports it (ge2 since zero-copy
    feeding), the caller's write of the batch into the feed buffers after it."""
    feed = r.get("host_feed_us_per_step")
    return fmt(r.get("host_us_per_step")) + ("" if feed is None else f" (+{fmt(feed)} feed)")


def fmt_loss(v):
    return "n/a" if v is None else f"{v:.3g}"


def fmt_ratio(v):
    return "n/a" if v is None else f"{v:.2f}×"


def torch_peak(rows, workload):
    """The smallest PyTorch peak of the workload (the strictest comparison)."""
    peaks = [r["device_bytes"] for r in rows
             if r.get("impl") == "torch" and r.get("workload") == workload and ok(r) and r.get("device_bytes")]
    return min(peaks) if peaks else None


def targets(rows):
    """(target, measured, limit, passed) per check; passed is None if unmeasured."""
    out = []

    def us(workload, impl, mode, tf32=False):
        r = find(rows, workload, impl, mode, tf32)
        return r["us_per_step"] if ok(r) else None

    def check(name, measured, limit, unit):
        passed = None if measured is None or limit is None else measured <= limit
        out.append((name, f"{fmt(measured)} {unit}" if measured is not None else "n/a",
                    f"≤ {fmt(limit)} {unit}" if limit is not None else "n/a", passed))

    check("mlp_small ge2 replay", us("mlp_small", "ge2", "replay"), 35.0, "µs/step")
    check("mlp_medium ge2 replay", us("mlp_medium", "ge2", "replay"), 100.0, "µs/step")
    check("mlp_large ge2 replay fp32 ≤ torch graph fp32", us("mlp_large", "ge2", "replay"),
          us("mlp_large", "torch", "graph"), "µs/step")
    tg = us("mlp_large", "torch", "graph")
    check("mlp_large ge2 replay TF32 ≤ 0.4 × torch graph fp32", us("mlp_large", "ge2", "replay", True),
          None if tg is None else 0.4 * tg, "µs/step")
    epoch = find(rows, "epoch", "ge2", "replay")
    check("epoch ge2 replay", epoch.get("ms_per_epoch") if ok(epoch) else None, 60.0, "ms")
    for w, factor in (("cnn64", 0.5), ("cnn256", 0.8)):
        tg = us(w, "torch", "graph")
        if find(rows, w, "ge2", "replay") is not None:
            check(f"{w} ge2 replay fp32 ≤ {factor} × torch graph fp32", us(w, "ge2", "replay"),
                  None if tg is None else factor * tg, "µs/step")
    cnn_epoch, torch_epoch = find(rows, "cnn_epoch", "ge2", "replay"), find(rows, "cnn_epoch", "torch", "graph")
    if cnn_epoch is not None:
        check("cnn_epoch ge2 replay ≤ 0.5 × torch graph", cnn_epoch.get("ms_per_epoch") if ok(cnn_epoch) else None,
              0.5 * torch_epoch["ms_per_epoch"] if ok(torch_epoch) else None, "ms")
    for w in WORKLOAD_ORDER:
        r = find(rows, w, "ge2", "replay")
        if r is None:
            continue
        check(f"{w} ge2 replay host time", r.get("host_us_per_step") if ok(r) else None, 5.0, "µs/step")
    for w in WORKLOAD_ORDER:
        r = find(rows, w, "ge2", "replay")
        if r is None:
            continue
        peak = torch_peak(rows, w)
        mine = r.get("device_bytes") / MIB if ok(r) and r.get("device_bytes") else None
        share = 0.8 if w.startswith("cnn") else 0.7
        check(f"{w} ge2 device memory ≤ {share} × torch peak", mine, None if peak is None else share * peak / MIB,
              "MiB")
    return out


def workload_table(rows, workload):
    present = [r for r in rows if r.get("workload") == workload]
    if not present:
        return []
    first = next((r for r in present if r.get("dims")), present[0])
    epoch = workload in ("epoch", "cnn_epoch", "epoch_loop", "cnn_epoch_loop")
    model = "CNN conv-bn-relu-pool ×2, fc" if first.get("model") == "cnn" else "MLP"
    lines = [f"### {workload}: {model} {first.get('dims', '?')}, batch {first.get('batch', '?')}"
             + (", one Fashion-MNIST epoch (60,000 images) kept by the program, full batches looped on the device"
                if workload.endswith("_loop") else
                ", one Fashion-MNIST epoch (60,000 images) with host → device staging" if epoch else ""), ""]
    head = ["impl", "mode", "µs/step", "p10–p90", "host µs/step", "× torch eager", "× torch graph",
            "kernels/step", "device MiB", "× torch peak", "taken MiB", "loss first → last"]
    if epoch:
        head.insert(2, "ms/epoch")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    peak = torch_peak(rows, workload)
    errors = []
    for precision in ("fp32", "tf32", "bf16"):
        for impl, mode in ROW_ORDER:
            r = find(rows, workload, impl, mode, precision)
            if r is None:
                continue
            label = mode + {"fp32": "", "tf32": " TF32", "bf16": " bf16"}[precision]
            if not ok(r):
                cells = [impl, label, "error"] + [""] * (len(head) - 3)
                errors.append(f"- {impl} {label}: {r.get('error')}")
            else:
                te = find(rows, workload, "torch", "eager", precision)
                tg = find(rows, workload, "torch", "graph", precision)
                mine = r.get("us_per_step")
                mem = r.get("device_bytes")
                # Ratios are ge2's: a PyTorch row leaves them empty.
                vs = ["", "", ""]
                if impl == "ge2":
                    vs = [fmt_ratio(ratio(mine, te["us_per_step"]) if ok(te) else None),
                          fmt_ratio(ratio(mine, tg["us_per_step"]) if ok(tg) else None),
                          fmt_ratio(ratio(mem, peak))]
                cells = [impl, label, fmt(mine), f"{fmt(r.get('us_p10'))}–{fmt(r.get('us_p90'))}",
                         fmt_host(r), vs[0], vs[1],
                         fmt(r.get("kernels_per_step")), fmt(mem / MIB if mem else None), vs[2],
                         fmt(r["taken_bytes"] / MIB if r.get("taken_bytes") else None),
                         f"{fmt_loss(r.get('loss_first'))} → {fmt_loss(r.get('loss_last'))}"]
                if epoch:
                    cells.insert(2, fmt(r.get("ms_per_epoch")))
                last = r.get("loss_last")
                if last is None or not math.isfinite(last):
                    errors.append(f"- {impl} {label}: final loss is {last}: the timed steps do not train")
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.extend(errors)
    if errors:
        lines.append("")
    return lines


def report(env, rows, commit, date):
    device = next((r.get("device") for r in env + rows if r.get("device")), "unknown device")
    torch_env = next((e for e in env if e.get("impl") == "torch"), {})
    lines = [f"## {date} · {device} · ge2 {commit} · torch {torch_env.get('torch', 'n/a')} "
             f"(CUDA {torch_env.get('cuda', 'n/a')})", ""]
    for w in WORKLOAD_ORDER + sorted({r.get("workload") for r in rows} - set(WORKLOAD_ORDER) - {None}):
        lines.extend(workload_table(rows, w))
    lines += ["### Targets", "", "| target | measured | limit | result |", "|---|---|---|---|"]
    checks = targets(rows)
    for name, measured, limit, passed in checks:
        lines.append(f"| {name} | {measured} | {limit} | "
                     f"{'not measured' if passed is None else 'pass' if passed else 'FAIL'} |")
    n_pass = sum(1 for c in checks if c[3])
    lines += ["", f"{n_pass} of {len(checks)} targets met."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commit", default="unknown", help="ge2 commit measured")
    ap.add_argument("--date", default=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"))
    ap.add_argument("files", nargs="+", help="JSON-lines outputs of ge2_bench and torch_bench.py")
    args = ap.parse_args(argv)
    env, rows = load(args.files)
    if not rows:
        print("report.py: no result rows in " + ", ".join(args.files), file=sys.stderr)
        return 1
    sys.stdout.write(report(env, rows, args.commit, args.date))
    return 0


if __name__ == "__main__":
    sys.exit(main())
