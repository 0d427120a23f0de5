#!/usr/bin/python3
"""The benchmarks' sshfs backend on the command line (check, mount, run);
benchlib/backends/sshfs.py says how it is set up."""
from benchlib.backends import sshfs

if __name__ == "__main__":
    sshfs.main()
