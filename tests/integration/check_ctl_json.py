#!/usr/bin/env python3
"""Checks the --json output of a dlfs-ctl command against a live daemon with
one dataset, read from standard input.

Used by 06_dlfs_ctl.sh:

  dlfs-ctl status --json | check_ctl_json.py status --name ds
      the first dataset is named NAME and its load is done
  dlfs-ctl stats --json  | check_ctl_json.py stats --samples 300
      the first dataset has SAMPLES samples, has served bytes and had raw
      lookups; the metadata bytes per sample are reported (> 0)
  dlfs-ctl verify --json | check_ctl_json.py verify
      verify passed and checked at least one extent
"""
import argparse
import json
import sys

from checklib import fail


def check(cond, msg):
    if not cond:
        fail(msg)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("status", help="dlfs-ctl status --json")
    st.add_argument("--name", default="ds", help="the first dataset's name")
    sa = sub.add_parser("stats", help="dlfs-ctl stats --json")
    sa.add_argument("--samples", type=int, required=True, help="the first dataset's sample count")
    sub.add_parser("verify", help="dlfs-ctl verify --json")
    args = ap.parse_args()

    try:
        s = json.load(sys.stdin)
    except ValueError as e:
        fail(f"dlfs-ctl {args.cmd} --json printed no JSON: {e}")
    if args.cmd == "status":
        d = s["datasets"][0]
        check(d["name"] == args.name, f"status: first dataset is {d['name']!r}, want {args.name!r}")
        check(d["load"]["state"] == "done", f"status: load state {d['load']['state']!r}, want 'done'")
    elif args.cmd == "stats":
        d = s["datasets"][0]
        check(d["samples"] == args.samples, f"stats: {d['samples']} samples, want {args.samples}")
        check(d["served"]["bytes"] > 0 and d["views"]["raw"]["lookups"] > 0, f"stats: nothing served or looked up: {d}")
        check(s["memory"]["metadata_bytes_per_sample"] > 0, f"stats: metadata bytes per sample {s['memory']}")
    else:
        check(s["ok"] and s["datasets"][0]["extents_checked"] > 0, f"verify: not ok or no extent checked: {s}")
    print(f"dlfs-ctl {args.cmd} --json ok")


if __name__ == "__main__":
    main()
