#!/usr/bin/python3
"""The benchmarks' NFS backend on the command line (check, mount, run);
benchlib/backends/nfs.py says how it is set up."""
from benchlib.backends import nfs

if __name__ == "__main__":
    nfs.main()
