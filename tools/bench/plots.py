#!/usr/bin/python3
"""PNG figures for the benchmark scripts, drawn from the results structures
they already build (and write as JSON), one function per figure:

  throughput_vs_ceiling  run_bench.py's results: cold MB/s of dlfs, the FUSE
                         ceiling and the backend per workload
  round_timeline         views_bench.py's results["rounds"]: per round, when
                         it was loaded, first read and how long the reader waited
  accuracy_vs_rl         shuffle_accuracy.py's results: validation accuracy per
                         epoch for each configuration, and the final one against RL
  nodes_vs_throughput    cluster_bench.py's results["aggregate"]: aggregate
                         epoch-view MB/s against the number of nodes
  loaders_vs_peers       loaders_bench.py's results: samples/s per loader,
                         epochs 1 and 2, per sample size and backend, with
                         each order's distance from a uniform shuffle

matplotlib (Debian's python3-matplotlib, Agg backend: no display) is optional:
without it `save` prints one line saying so and the scripts' tables stand alone.

Re-plot a saved results file without re-running the benchmark:
  plots.py {throughput_vs_ceiling|round_timeline|accuracy_vs_rl|nodes_vs_throughput|loaders_vs_peers}
           RESULTS.json [--plots DIR] [--note TEXT]
"""
import argparse
import json
import os
import platform

MiB = 1 << 20
DPI = 100  # keeps each committed PNG well under 150 KB


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None with the reason."""
    try:
        import matplotlib
    except ImportError as e:
        return None, f"matplotlib not importable ({e}); install python3-matplotlib"
    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt
    return plt, None


def machine():
    """What the figures were measured on, for titles: '2-core x86_64 Linux host'."""
    return f"{os.cpu_count()}-core {platform.machine()} {platform.system()} host"


def _finish(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def throughput_vs_ceiling(results, path, note=""):
    """Grouped bars: cold median MB/s per workload for dlfs, the ceiling and
    the backend; dlfs/ceiling written above each dlfs bar."""
    plt, _ = pyplot()
    rows = results["rows"]
    targets = [("dlfs", "DLFS raw view"), ("ceiling", "FUSE ceiling (memory)"), ("backend", "backend directory")]
    width = 0.8 / len(targets)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows) + 2), 4.5))
    for i, (key, label) in enumerate(targets):
        xs = [j + (i - 1) * width for j in range(len(rows))]
        ys = [r["cold_median_bps"][key] / 1e6 for r in rows]
        bars = ax.bar(xs, ys, width, label=label)
        if key == "dlfs":
            for bar, r in zip(bars, rows):
                ax.annotate(f"{r['dlfs_over_ceiling_cold']:.2f}x", (bar.get_x() + bar.get_width() / 2,
                            bar.get_height()), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["workload"].replace(" bs=", "\nbs=") for r in rows], fontsize=8)
    ax.set_ylabel("cold read throughput, median (MB/s)")
    ax.set_xlabel("fio workload (label over DLFS: DLFS / ceiling)")
    ax.set_title(f"DLFS against the FUSE ceiling and the backend\n{note or machine()}", fontsize=10)
    ax.legend(fontsize=8)
    return _finish(plt, fig, path)


def round_timeline(rounds, path, note=""):
    """One panel per shuffle ratio R: a bar per (epoch, round) from its load
    start to its load end and a dot at its first read (none: prefetched, not
    read yet). A red dot, labelled, where reads waited for the round: wait_s
    sums every waiting read's wait (concurrent reads each count), so it is a
    number, not an interval on the time axis."""
    plt, _ = pyplot()
    fig, axes = plt.subplots(len(rounds), 1, figsize=(8, 1.2 + 1.6 * len(rounds)), squeeze=False)
    for ax, (ratio, r) in zip(axes[:, 0], rounds.items()):
        tl = r["timeline"]
        ys = range(len(tl))
        ax.barh(ys, [e["load_end_s"] - e["load_start_s"] for e in tl], left=[e["load_start_s"] for e in tl],
                height=0.5, label="round loading")
        read = [(y, e) for y, e in zip(ys, tl) if e["first_read_s"] > 0]  # 0: never read
        for waited, colour, label in ((False, "black", "first read"), (True, "red", "first read, after waiting")):
            pts = [(y, e) for y, e in read if (e["wait_s"] > 0) == waited]
            ax.scatter([e["first_read_s"] for _, e in pts], [y for y, _ in pts], color=colour, s=14, zorder=3,
                       label=label)
        for y, e in read:
            if e["wait_s"] > 0:
                ax.annotate(f" reads waited {e['wait_s']:.2f} s", (e["first_read_s"], y), fontsize=7, va="center")
        ax.set_yticks(list(ys))
        ax.set_yticklabels([f"e{e['epoch']} r{e['round']}" for e in tl], fontsize=7)
        ax.invert_yaxis()
        rl = r["plan"]["randomization_level"] * 100
        ax.set_title(f"R = {ratio}: {r['plan']['rounds_per_epoch']} rounds/epoch, RL {rl:.2f}%, reader paced at "
                     f"{r['pace_mb_s']:g} MB/s, {r['stalls']} stalled acquires", fontsize=9)
        ax.set_ylabel("epoch, round", fontsize=8)
        ax.legend(fontsize=7, loc="upper right")  # rounds run top left to bottom right
        ax.set_xlim(left=0)
    axes[-1, 0].set_xlabel("seconds since the daemon started")
    fig.suptitle(f"Round loads against the reader (views_bench.py rounds)\n{note or machine()}", fontsize=10)
    return _finish(plt, fig, path)


def accuracy_vs_rl(results, path, note=""):
    """Left: validation accuracy per epoch, one line per configuration (its RL
    in the legend). Right: the final accuracy against RL."""
    plt, _ = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    for r in results:
        name = "constant order" if r["config"] == "constant" else f"R = {r['config']}"
        label = f"{name} (RL {r['rl'] * 100:.2f}%)"
        left.plot(range(1, len(r["accuracy"]) + 1), [a * 100 for a in r["accuracy"]], marker="o", label=label)
        right.scatter(r["rl"] * 100, r["accuracy"][-1] * 100, label=label)
    left.xaxis.get_major_locator().set_params(integer=True)
    left.set_xlabel("epochs trained")
    left.set_ylabel("validation accuracy (%)")
    left.set_title("accuracy per epoch", fontsize=9)
    left.legend(fontsize=8)
    right.set_xlabel("randomization level RL (%)")
    right.set_ylabel("final validation accuracy (%)")
    right.set_title(f"after {max(len(r['accuracy']) for r in results)} epochs", fontsize=9)
    right.legend(fontsize=8)
    fig.suptitle(f"SmallCNN on Fashion-MNIST read through DLFS epoch views (shuffle_accuracy.py)\n"
                 f"{note or machine()}", fontsize=10)
    return _finish(plt, fig, path)


def nodes_vs_throughput(aggregate, path, note=""):
    """Aggregate epoch-view MB/s (median line, every run a dot) against nodes."""
    plt, _ = pyplot()
    nodes = sorted(aggregate, key=int)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.plot([int(n) for n in nodes], [aggregate[n]["mb_s"] for n in nodes], marker="o", label="median")
    runs = [(int(n), v) for n in nodes for v in aggregate[n]["runs"]]
    ax.scatter([n for n, _ in runs], [v for _, v in runs], color="gray", s=14, zorder=3, label="each run")
    ax.set_xticks([int(n) for n in nodes])
    ax.set_xlabel("nodes (dlfsd daemons, one network namespace each)")
    ax.set_ylabel("aggregate epoch-view throughput (MB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Striped dataset, every node streaming its rank's view at once\n"
                 f"{note or machine()} (all nodes share it)", fontsize=10)
    ax.legend(fontsize=8)
    return _finish(plt, fig, path)


def loaders_vs_peers(results, path, note=""):
    """One panel per (sample size, backend): median samples/s of every loader,
    epoch 1 (cold) and epoch 2 side by side on a log scale, DLFS's variants
    in blue; over each pair the epoch-1 ratio to the fastest peer, under each
    name the epoch-1 order's max |z| against a uniform permutation
    (shuffle_quality.py: below 4 is indistinguishable from uniform)."""
    plt, _ = pyplot()
    cfg, summary = results["config"], results["summary"]
    sizes = [k for k in cfg["sizes"] if k in summary]
    backends = [b for b in cfg["backends"] if any(b in summary[k] for k in sizes)]
    fig, axes = plt.subplots(len(sizes), len(backends), figsize=(5.2 * len(backends) + 0.8, 3.9 * len(sizes)),
                             squeeze=False)
    for row, k in enumerate(sizes):
        for col, b in enumerate(backends):
            ax = axes[row][col]
            cells = summary[k].get(b, {})
            names = [v for v in cfg["variants"] if v in cells]
            for i, v in enumerate(names):
                dlfs = v.startswith("dlfs")
                for e, dx, alpha in ((1, -0.2, 1.0), (2, 0.2, 0.45)):
                    c = cells[v][f"epoch{e}"]
                    bar = ax.bar(i + dx, c["samples_s"], 0.4, color="tab:blue" if dlfs else "tab:gray", alpha=alpha,
                                 label=(f"epoch {e}" + (" (cold)" if e == 1 else "")) if i == 0 else None)
                    if e == 1 and c["ratio_fastest_peer"] is not None:
                        ax.annotate(f"{c['ratio_fastest_peer']:.2f}x", (i, bar[0].get_height()), ha="center",
                                    va="bottom", fontsize=7)
            ax.set_yscale("log")
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels([f"{v}\nz {cells[v]['epoch1']['shuffle']['max_z']:.0f}" for v in names],
                               rotation=60, ha="right", fontsize=7)
            ax.set_ylabel("samples/s, median", fontsize=8)
            ax.set_title(f"{cfg['sizes'][k]['label']} samples, {b}", fontsize=9)
            if row == 0 and col == 0:
                ax.legend(fontsize=7)
    fig.suptitle(f"Loaders over the same samples: {cfg['workers']} workers, batch {cfg['batch']}\n"
                 f"over the bars: epoch 1 / fastest peer; z: epoch 1's max |z| against a uniform shuffle\n"
                 f"{note or machine()}", fontsize=9)
    return _finish(plt, fig, path)


def default_dir(json_path, workdir):
    """Where a script puts its figures without --plots: next to its JSON, else its workdir."""
    return os.path.dirname(os.path.abspath(json_path)) if json_path else workdir


FIGURES = {f.__name__: f for f in (throughput_vs_ceiling, round_timeline, accuracy_vs_rl, nodes_vs_throughput,
                                    loaders_vs_peers)}


def save(figure, data, plots_dir, note=""):
    """Draws one figure into plots_dir/<figure>.png and says where; without
    matplotlib, one line saying the plot was skipped and why."""
    plt, why = pyplot()
    if plt is None:
        print(f"plots: {figure}.png skipped: {why}")
        return None
    os.makedirs(plots_dir, exist_ok=True)
    path = FIGURES[figure](data, os.path.join(plots_dir, f"{figure}.png"), note)
    print(f"plot: {path}")
    return path


# Where each figure's data sits in the JSON its script writes.
JSON_PART = {"throughput_vs_ceiling": lambda j: j, "round_timeline": lambda j: j["rounds"],
             "accuracy_vs_rl": lambda j: j, "nodes_vs_throughput": lambda j: j["aggregate"],
             "loaders_vs_peers": lambda j: j}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("figure", choices=sorted(FIGURES))
    ap.add_argument("results", help="the JSON the benchmark wrote")
    ap.add_argument("--plots", help="output directory (default: the JSON's directory)")
    ap.add_argument("--note", default="", help="the title's second line (default: this machine)")
    a = ap.parse_args()
    with open(a.results) as f:
        j = json.load(f)
    try:
        data = JSON_PART[a.figure](j)
    except (KeyError, TypeError):
        raise SystemExit(f"plots.py: {a.results} holds no {a.figure} data (wrong figure for this results file?)")
    save(a.figure, data, a.plots or os.path.dirname(os.path.abspath(a.results)), a.note)


if __name__ == "__main__":
    main()
