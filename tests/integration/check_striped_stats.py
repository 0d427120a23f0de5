#!/usr/bin/env python3
"""Checks the stats of N daemons serving one dataset striped across them,
after every node read the whole dataset with every stripe resident: each
node's stripe is a proper part of the dataset; nothing came from the backend;
bytes came both from the node's own memory and remotely, remotely at least
the size of the other stripes (the raw tree alone reads them once); every
other member is up.

Used by cluster_scenario.sh (20_cluster_netns, 21_cluster_shm):

  check_striped_stats.py WORK N

Node i's stats are WORK/mnt<i>/.dlfs/stats.
"""
import argparse

from checklib import fail, mount_stats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", help="the scenario's work directory (mountpoints mnt0 .. mnt<N-1>)")
    ap.add_argument("n", type=int, help="nodes")
    args = ap.parse_args()
    work, n = args.work, args.n
    for i in range(n):
        s = mount_stats(f"{work}/mnt{i}")
        d = s["datasets"][0]
        by = d["bytes_by_source"]
        stripe = d["stripe"]["end"] - d["stripe"]["begin"]
        if not 0 < stripe < d["total_bytes"]:
            fail(f"node {i}: stripe {d['stripe']} is not a part of the dataset")
        if by["backend"] != 0:
            fail(f"node {i}: {by['backend']} bytes came from the backend with everything resident")
        if not (by["remote"] > 0 and by["local"] > 0):
            fail(f"node {i}: {by}")
        if not by["remote"] >= d["total_bytes"] - stripe:
            fail(f"node {i}: only {by['remote']} remote bytes")
        members = s["cluster"]["members"]
        if [m["state"] for m in members].count("up") != n - 1:
            fail(f"node {i}: not {n - 1} members up: {members}")
    print("stats ok")


if __name__ == "__main__":
    main()
