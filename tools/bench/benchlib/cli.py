"""The command line the benchmarks share: --build (whose binaries run),
--workdir (datasets, mounts, logs), --repeat, --quick, --json; the check that
they run as root and that the binaries they start are built; sizes as 256K."""
import argparse
import os
import shutil
import sys

from . import SRC

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_arg(text):
    """Bytes of a size such as 4096, 3K, 256KiB, 1M or 2G."""
    t = text.upper().removesuffix("IB").removesuffix("B")
    return int(float(t[:-1]) * UNITS[t[-1]]) if t[-1] in UNITS else int(t)


def parser(doc, workdir=None, repeat=None, quick=None, json=None, only=None,
           build="meson build directory whose binaries run"):
    """An ArgumentParser with the script's docstring as its help and the shared
    options the script names (None leaves one out; for --quick and --json the
    value is the option's help, saying what it does in this script; for --only
    the parts the script has, all run by default)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if build:
        ap.add_argument("--build", default=os.path.join(SRC, "build"), help=build)
    if workdir:
        ap.add_argument("--workdir", default=workdir, help="datasets (generated once, cached), mounts and logs")
    if repeat:
        ap.add_argument("--repeat", type=int, default=repeat, help="repetitions (figures are medians)")
    if quick:
        ap.add_argument("--quick", action="store_true", help=quick)
    if json:
        ap.add_argument("--json", help=json)
    if only:
        ap.add_argument("--only", default=only, help=f"the parts to run, comma-separated (default {only})")
    return ap


def require_root(ap, why):
    """Exits saying why the script needs root unless it runs as root."""
    if os.geteuid() != 0:
        sys.exit(f"{ap.prog}: needs root ({why})")


def require_tools(ap, *tools):
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"{ap.prog}: '{tool}' not found (run tools/install-deps.sh)")


def built(ap, build, rel):
    """The path of binary `rel` (e.g. fs/dlfsd) of a build; exits if it is not built."""
    path = os.path.join(build, rel)
    if not os.access(path, os.X_OK):
        sys.exit(f"{ap.prog}: {path} not built (meson compile -C {build})")
    return path
