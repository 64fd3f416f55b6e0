#!/usr/bin/env python3
"""report.py against hand-made rows whose ratios and verdicts are worked out
by hand below (no GPU, no torch)."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

MIB = 1 << 20


def row(impl, workload, mode, us, tf32=False, **extra):
    r = dict(impl=impl, workload=workload, mode=mode, tf32=tf32, batch=64, dims="784-256-128-10",
             device="Test GPU", us_per_step=us, us_p10=us, us_p90=us, host_us_per_step=3.0,
             kernels_per_step=12, device_bytes=10 * MIB, loss_first=2.3, loss_last=1.1)
    r.update(extra)
    return r


ROWS = [
    # small: 30 µs passes ≤ 35; 0.5× torch graph (60), 0.25× torch eager (120).
    row("ge2", "mlp_small", "replay", 30.0, device_bytes=6.5 * MIB, host_feed_us_per_step=9.75),
    row("torch", "mlp_small", "graph", 60.0, device_bytes=12 * MIB),
    row("torch", "mlp_small", "eager", 120.0, device_bytes=10 * MIB),
    # medium: 101 µs fails ≤ 100; host 6 µs fails ≤ 5.
    row("ge2", "mlp_medium", "replay", 101.0, host_us_per_step=6.0),
    row("torch", "mlp_medium", "graph", 150.0),
    # large: fp32 1000 vs torch graph 900 fails; TF32 350 ≤ 0.4 × 900 = 360 passes.
    row("ge2", "mlp_large", "replay", 1000.0),
    row("ge2", "mlp_large", "replay", 350.0, tf32=True),
    row("torch", "mlp_large", "graph", 900.0),
    row("torch", "mlp_large", "graph", 500.0, tf32=True),
    row("ge2", "mlp_large", "replay", 200.0, precision="bf16"),
    row("torch", "mlp_large", "graph", 250.0, precision="bf16"),
    # medium eager: trains into NaN (ge2 writes null, torch NaN).
    row("ge2", "mlp_medium", "eager", 90.0, loss_last=None),
    row("torch", "mlp_medium", "eager", 300.0, loss_last=float("nan")),
    # epoch: ge2 failed.
    dict(impl="ge2", workload="epoch", mode="replay", tf32=False, error="GE2_ERR_CUDA: boom"),
]


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.checks = {name: (measured, limit, passed) for name, measured, limit, passed in report.targets(ROWS)}

    def test_speed_targets(self):
        self.assertIs(self.checks["mlp_small ge2 replay"][2], True)
        self.assertIs(self.checks["mlp_medium ge2 replay"][2], False)
        self.assertIs(self.checks["mlp_large ge2 replay fp32 ≤ torch graph fp32"][2], False)
        tf32 = self.checks["mlp_large ge2 replay TF32 ≤ 0.4 × torch graph fp32"]
        self.assertIs(tf32[2], True)
        self.assertEqual(tf32[1], "≤ 360.0 µs/step")

    def test_unmeasured_is_not_a_pass(self):
        self.assertIsNone(self.checks["epoch ge2 replay"][2])
        self.assertEqual(self.checks["epoch ge2 replay"][0], "n/a")

    def test_host_and_memory(self):
        self.assertIs(self.checks["mlp_small ge2 replay host time"][2], True)
        self.assertIs(self.checks["mlp_medium ge2 replay host time"][2], False)
        # 6.5 MiB against the smaller torch peak, 10 MiB: limit 7.0 MiB.
        mem = self.checks["mlp_small ge2 device memory ≤ 0.7 × torch peak"]
        self.assertEqual(mem[1], "≤ 7.0 MiB")
        self.assertIs(mem[2], True)
        # medium: 10 MiB against 10 MiB fails.
        self.assertIs(self.checks["mlp_medium ge2 device memory ≤ 0.7 × torch peak"][2], False)

    def test_table_ratios_and_errors(self):
        text = report.report([], ROWS, "abc1234", "2026-11-21")
        small = next(line for line in text.splitlines() if line.startswith("| ge2 | replay | 30.0"))
        cells = [c.strip() for c in small.strip("|").split("|")]
        self.assertEqual(cells[4], "3.0 (+9.8 feed)")  # the batch's write, apart from the step
        self.assertEqual(cells[5], "0.25×")  # 30 / 120
        self.assertEqual(cells[6], "0.50×")  # 30 / 60
        self.assertEqual(cells[9], "0.65×")  # 6.5 MiB / 10 MiB
        torch_small = next(line for line in text.splitlines() if line.startswith("| torch | graph | 60.0"))
        self.assertEqual([c.strip() for c in torch_small.strip("|").split("|")][4], "3.0")
        large_tf32 = next(line for line in text.splitlines() if line.startswith("| ge2 | replay TF32"))
        self.assertEqual([c.strip() for c in large_tf32.strip("|").split("|")][6], "0.70×")  # 350 / 500
        # bf16 rows (a "precision" field) compare with PyTorch's bf16 rows, not the fp32 ones
        large_bf16 = next(line for line in text.splitlines() if line.startswith("| ge2 | replay bf16"))
        self.assertEqual([c.strip() for c in large_bf16.strip("|").split("|")][6], "0.80×")  # 200 / 250
        self.assertIn("- ge2 replay: GE2_ERR_CUDA: boom", text)
        self.assertIn("- ge2 eager: final loss is None", text)
        self.assertIn("- torch eager: final loss is nan", text)
        self.assertNotIn("- ge2 replay: final loss", text)
        self.assertTrue(text.rstrip().endswith("targets met."))
        self.assertIn("2026-11-21 · Test GPU · ge2 abc1234", text)

    def test_main_skips_log_lines(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("run.sh: CUDA libraries from /x\n")
            f.write(json.dumps(dict(impl="torch", env=True, torch="2.11.0", cuda="13.0", device="Test GPU")) + "\n")
            f.write("{not json\n")
            for r in ROWS:
                f.write(json.dumps(r) + "\n")
        try:
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(report.main(["--commit", "c0ffee", f.name]), 0)
            self.assertIn("torch 2.11.0 (CUDA 13.0)", out.getvalue())
            self.assertIn("| ge2 | replay | 30.0", out.getvalue())
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
