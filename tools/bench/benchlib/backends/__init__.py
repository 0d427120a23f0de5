"""Network filesystems over loopback that a benchmark reads its dataset
through, set up and torn down by it: nfs (nfs.py: the kernel's nfsd and
client, else nfs-ganesha and our libnfs FUSE client, nfs_ganesha.py) and
sshfs (sshfs.py). Each mount is a context manager (common.Setup); the
scripts nfs_backend.py and sshfs_backend.py give them a command line."""
import os

from . import nfs, sshfs

SHARED = ("nfs", "sshfs")


def nfs_client(build):
    """The ganesha mode's NFS client, from the build whose dlfsd runs."""
    return os.path.join(build, "tools/bench/dlfs-bench-nfsmount")


def unavailable_reason(backend, build, latency_ms=0):
    """None if `backend` (nfs or sshfs) can run here, else one line saying why not."""
    if backend == "nfs":
        return nfs.unavailable_reason(latency_ms, nfs_client(build))
    return sshfs.unavailable_reason()


def mount(backend, src, mountpoint, build, nfs_vers="4.2", latency_ms=0):
    """The mount of `src` at `mountpoint` over `backend` (a context manager with
    .mountpoint, .options and .run_prefix)."""
    if backend == "nfs":
        return nfs.NfsMount(src, mountpoint, nfs_vers, latency_ms, nfs_client(build))
    return sshfs.SshfsMount(src, mountpoint)
