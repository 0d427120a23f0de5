"""tools/bench/plots.py: every figure drawn from a small results structure of
the shape its benchmark builds is a non-empty PNG; without matplotlib the
figure is skipped with one line; every benchmark script takes --plots."""
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(SRC, "tools/bench")
sys.path.insert(0, BENCH)
import plots  # noqa: E402

HAVE_MPL = importlib.util.find_spec("matplotlib") is not None
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def bench_row(workload, dlfs, ceiling, backend):
    med = {"dlfs": dlfs, "ceiling": ceiling, "backend": backend}
    return {"workload": workload, "cold_median_bps": med, "warm_bps": med,
            "dlfs_over_ceiling_cold": dlfs / ceiling, "dlfs_over_backend_cold": dlfs / backend}


def round_entry(epoch, rnd, start):
    return {"epoch": epoch, "round": rnd, "bytes": 8 << 20, "load_start_s": start, "load_end_s": start + 0.3,
            "first_read_s": start + 0.5, "wait_s": 0.02 if start == 0 else 0.0}


SYNTHETIC = {
    "throughput_vs_ceiling": {"rows": [bench_row("seq bs=262144 jobs=1", 1.6e9, 1.8e9, 1.2e9),
                                       bench_row("rand4k bs=4096 jobs=1", 2.0e8, 2.2e8, 1.0e8)]},
    "round_timeline": {str(r): {"plan": {"rounds_per_epoch": n, "randomization_level": 0.97}, "stalls": 1,
                                "pace_mb_s": 150, "stream_mb_s": 149.0,
                                "timeline": [round_entry(e, i, e * n + i) for e in (0, 1) for i in range(n)]}
                       for r, n in ((0.5, 2), (0.25, 4))},
    "accuracy_vs_rl": [{"config": c, "shuffle_ratio": 1.0, "rl": rl, "accuracy": [0.85, 0.88, 0.89 + rl / 100],
                        "seconds": 60.0} for c, rl in (("1", 1.0), ("0.5", 0.96), ("constant", 0.0))],
    "nodes_vs_throughput": {str(n): {"mb_s": 1000.0 / n, "runs": [990.0 / n, 1000.0 / n, 1010.0 / n],
                                     "bytes_by_source": []} for n in (1, 2, 3)},
    "loaders_vs_peers": {
        "config": {"sizes": {"small": {"label": "2,000 x 3K"}}, "backends": ["local", "nfs"],
                   "variants": ["dlfs-views", "wds-1k", "dali-tfrecord"], "workers": 2, "batch": 256},
        "summary": {"small": {b: {v: {f"epoch{e}": {"samples_s": s * e, "ratio_fastest_peer": r,
                                                    "shuffle": {"max_z": z}} for e in (1, 2)}
                                  for v, s, r, z in (("dlfs-views", 9e4, 1.2, 1.1), ("wds-1k", 4e4, 0.5, 29.0),
                                                     ("dali-tfrecord", 7e4, 1.0, 15.0))}
                              for b in ("local", "nfs")}}},
}


def quiet(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fn(*args)
    return result, out.getvalue()


@unittest.skipUnless(HAVE_MPL, "python3-matplotlib is not installed")
class FigureTest(unittest.TestCase):
    def test_every_figure_is_a_png(self):
        self.assertEqual(set(SYNTHETIC), set(plots.FIGURES))
        with tempfile.TemporaryDirectory() as d:
            for name, data in SYNTHETIC.items():
                with self.subTest(figure=name):
                    path, out = quiet(plots.save, name, data, os.path.join(d, "sub"), "synthetic data")
                    self.assertEqual(path, os.path.join(d, "sub", f"{name}.png"))
                    self.assertIn(path, out)
                    with open(path, "rb") as f:
                        head = f.read(8)
                    self.assertEqual(head, PNG_MAGIC)
                    self.assertGreater(os.path.getsize(path), 1000)
                    self.assertLess(os.path.getsize(path), 150_000)

    def test_replot_from_json(self):
        with tempfile.TemporaryDirectory() as d:
            res = os.path.join(d, "cluster.json")
            with open(res, "w") as f:
                json.dump({"aggregate": SYNTHETIC["nodes_vs_throughput"]}, f)
            r = subprocess.run([sys.executable, os.path.join(BENCH, "plots.py"), "nodes_vs_throughput", res],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertGreater(os.path.getsize(os.path.join(d, "nodes_vs_throughput.png")), 1000)
            r = subprocess.run([sys.executable, os.path.join(BENCH, "plots.py"), "round_timeline", res],
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("holds no round_timeline data", r.stderr)


class NoMatplotlibTest(unittest.TestCase):
    def test_skipped_with_one_line(self):
        with tempfile.TemporaryDirectory() as d, mock.patch.dict(sys.modules, {"matplotlib": None}):
            path, out = quiet(plots.save, "nodes_vs_throughput", SYNTHETIC["nodes_vs_throughput"], d)
            self.assertIsNone(path)
            self.assertEqual(os.listdir(d), [])
        self.assertEqual(len(out.splitlines()), 1)
        self.assertIn("nodes_vs_throughput.png skipped", out)
        self.assertIn("python3-matplotlib", out)


class ScriptsTakePlotsTest(unittest.TestCase):
    SCRIPTS = ["tools/bench/run_bench.py", "tools/bench/views_bench.py", "tools/bench/cluster_bench.py",
               "tools/experiments/shuffle_accuracy.py"]

    def test_help_lists_plots(self):
        for script in self.SCRIPTS:
            with self.subTest(script=script):
                if script.endswith("shuffle_accuracy.py") and importlib.util.find_spec("torch") is None:
                    self.skipTest("python3-torch is not installed (shuffle_accuracy.py imports it)")
                r = subprocess.run([sys.executable, os.path.join(SRC, script), "--help"], capture_output=True,
                                   text=True, timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("--plots PLOTS", r.stdout)


if __name__ == "__main__":
    unittest.main()
