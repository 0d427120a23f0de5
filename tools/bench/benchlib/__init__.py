"""What the benchmark scripts of tools/bench share, one concept a module:

  cli       the options every script takes, the root and build checks, sizes
  daemons   dlfsd and the FUSE ceiling started, waited for, always stopped
  datasets  the generated datasets, made once and cached in a workdir
  readers   the read loops, drop_caches, fio
  stats     a dlfsd's stats and FUSE request counters (also for tests/integration)
  proc      CPU time and memory figures from /proc
  report    progress lines, medians and ratios, JSON results
  teardown  signals turned into a clean exit, steps undone last-first
  client    the Python client (python/dlfs) of this tree
  loaders   the PyTorch DataLoader datasets pipeline_bench.py measures
  formats   the peers' storage formats (tar, MDS, TFRecord, FFCV) written from a files dataset
  peers     loaders_bench.py's loaders (DLFS and its peers), one per process;
            peers_dali and peers_ffcv for DALI's readers and FFCV
  shuffle_quality  how far a delivered order is from a uniform permutation
  backends  shared filesystems over loopback (NFS, sshfs) for pipeline and load benches

Only the standard library is imported here, so that tests can import `stats`."""
import os

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
