#!/usr/bin/env python3
"""Where a step's time goes, from a trainer's --time-launches kernel report:

    train_gpt ... --time-launches > run.log
    python3 bench/kernel_breakdown.py run.log [--top 25]

sums the per-launch times (each node's line: "node N op  T us  P%  shapes:
kernel", or "node N op  T us beside, ..." for a launch on the side stream)
by op and by kernel, and prints two markdown tables, largest first, with
each row's share of the summed step. The times are eager launches' (what
--time-launches measures), so their sum is the device time of one step
without the graph's overlap; side-stream launches are summed apart, as they
run beside the main stream's."""
import argparse
import collections
import re
import sys

LINE = re.compile(r"^node\s+\d+\s+(\S+)\s+([0-9.]+) us\s+(?:[0-9.]+%|beside, [0-9.]+-[0-9.]+ us into the step)\s+(.*?): (.*)$")
# what a kernel's description says that differs from launch to launch: the
# side stream's wait (dropped) and a tuned choice's time (kept as " (")
SIDE_WAIT = re.compile(r" \([0-9.]+ us of it waiting for the side stream\)$")
TUNED_TIME = re.compile(r" \((?:cached|tuned) [0-9.]+ us of ")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args(argv)
    by_op, by_kernel = collections.defaultdict(lambda: [0.0, 0]), collections.defaultdict(lambda: [0.0, 0])
    side_total = 0.0
    with open(a.report, errors="replace") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            op, us, kernel = m.group(1), float(m.group(2)), TUNED_TIME.sub(" (", SIDE_WAIT.sub("", m.group(4).strip()))
            if " us beside, " in line:
                op = f"{op} (side stream)"
                side_total += us
            for table, key in ((by_op, op), (by_kernel, f"{op}: {kernel}")):
                table[key][0] += us
                table[key][1] += 1
    total = sum(us for us, _ in by_op.values()) - side_total
    if not total:
        sys.exit(f"kernel_breakdown: no timed launches in {a.report} (run the trainer with --time-launches)")
    for title, table in (("op", by_op), ("kernel", by_kernel)):
        print(f"\n| {title} | launches | ms/step | share |\n|---|---|---|---|")
        for key, (us, n) in sorted(table.items(), key=lambda kv: -kv[1][0])[: a.top]:
            print(f"| {key} | {n} | {us / 1000:.3f} | {100 * us / total:.1f}% |")
    print(f"\nsum of timed launches: {total / 1000:.2f} ms/step" +
          (f" (and {side_total / 1000:.2f} ms on the side stream, beside them)" if side_total else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
