"""How a benchmark reports: progress lines as it measures, medians over its
repetitions, ratios of runs made next to each other, and its JSON results.
(The PNG figures are plots.py's.)"""
import json
import statistics


def log(msg):
    print(f"[bench] {msg}", flush=True)


def medians(runs):
    """{name: median} of {name: [figure per repetition]}."""
    return {k: statistics.median(v) for k, v in runs.items()}


def paired_ratio(xs, ys):
    """The median of per-repetition ratios x/y: runs of one repetition ran next
    to each other, and the machine's speed drifts between repetitions more
    than within one."""
    return statistics.median(x / y for x, y in zip(xs, ys))


def write_json(path, results, indent=1):
    with open(path, "w") as f:
        json.dump(results, f, indent=indent)
