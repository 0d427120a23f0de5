"""A real NFS backend for the benchmarks, in one of two modes (`mode()` picks):

  kernel   Debian's nfs-kernel-server exports a local directory over loopback and
           the kernel's NFS client mounts it read-only (below), where the kernel has
           nfsd and an NFS client;
  ganesha  otherwise: Debian's nfs-ganesha serves it over NFSv4 on 127.0.0.1 and a
           user-space client, dlfs-bench-nfsmount (libnfs under FUSE, built from
           nfs_fuse_client.cc), mounts it read-only with the Linux client's caching
           rules; see nfs_ganesha.py. No added latency in this mode.

Both are torn down afterwards, also on errors and signals (`NfsMount(...)` gives a
context manager; the CLI turns SIGTERM/SIGHUP into a normal exit).

Server: kernel nfsd started by hand (no systemd needed): `/proc/fs/nfsd` mounted,
`rpcbind -f`, `rpc.mountd -F` (also needed for NFSv4: it answers the kernel's
export upcalls) and `rpc.nfsd -G 10 -L 10 8` (grace and lease time 10 s). If an nfsd is
already running (threads > 0), it is used as it is and only our export is added
and removed. Export options: `ro,no_subtree_check,no_root_squash,insecure,fsid=<n>`
(a fixed fsid: the exported directory need not be a mount point).

Client mount options (`MOUNT_OPTIONS`): `ro,vers=4.2,proto=tcp,hard,nconnect=4`.
Attribute caching keeps the kernel's defaults (acregmin=3 s, acregmax=60 s,
acdirmin=30 s, acdirmax=60 s) and close-to-open consistency (`cto`): every open
revalidates the file with the server (NFSv4: at least an OPEN per file, v3: a
GETATTR), as on a cluster's NFS, and that per-file cost is what DLFS removes.
rsize/wsize are left to negotiation (Linux's nfsd offers up to 1 MiB). `--vers 3` mounts NFSv3 with `nolock`
(no lockd/statd needed for a read-only benchmark). The NFSv4 grace period after a
fresh server start is shortened to 10 s; `NfsMount.wait_ready` opens a file so
that grace is over before anything is measured.

Latency (`latency_ms > 0`) models a cluster link: a network namespace with a
veth pair (host 10.231.<k>.1, namespace 10.231.<k>.2, no other route), `tc qdisc
... netem delay` of latency_ms/2 on each side (so latency_ms is the added round
trip), the export restricted to the namespace's address, and the mount made with
`nsenter --net=<ns>`: the NFS client's sockets belong to the network namespace
current at mount time, so every RPC of this mount crosses the delayed link, while
the mount itself stays in the host's mount namespace (`ip netns exec` would put it
in a private mount namespace that dies with the command). Readers (dlfsd, the
Python DataLoader) therefore need not run in the namespace; `run_prefix` gives
`nsenter --net=...` for callers that want them there anyway.

Requirements, kernel mode: root, Debian's nfs-kernel-server and nfs-common, a
kernel with nfsd and the NFS client (built in or as modules), and for latency netem
(CONFIG_NET_SCH_NETEM). Ganesha mode: root, /dev/fuse, nfs-ganesha and
nfs-ganesha-vfs, and the built dlfs-bench-nfsmount (--client, or
$DLFS_BENCH_NFSMOUNT, default <source>/build/tools/bench/). `unavailable_reason()`
says what is missing for each mode.

CLI:
  nfs_backend.py check [--latency-ms N]       exit 0 if usable, 77 with the reason if not
  nfs_backend.py mount SRC MNT [--vers 4.2|3] [--latency-ms N]
                                              mount, wait for SIGINT/SIGTERM, tear down
  nfs_backend.py run SRC MNT [--vers ..] [--latency-ms N] -- CMD ...
                                              run CMD with the mount present, tear down
  every subcommand: [--mode auto|kernel|ganesha] [--client PATH]
  (--vers applies to the kernel mode; the ganesha mode's client speaks NFSv4.0)
"""
import os
import shutil
import subprocess
import time

from . import nfs_ganesha
from .common import Setup, Unavailable, main_cli, run, stop_process

NFSD_DIR = "/proc/fs/nfsd"
MOUNT_OPTIONS = "ro,proto=tcp,hard,nconnect=4"
GRACE_S = 10  # the smallest grace/lease time rpc.nfsd accepts
TOOLS = {"exportfs": "nfs-kernel-server", "rpc.nfsd": "nfs-kernel-server", "rpc.mountd": "nfs-kernel-server",
         "rpcbind": "rpcbind (a dependency of nfs-common)", "mount.nfs": "nfs-common", "nsenter": "util-linux"}


def log(msg):
    print(f"[nfs] {msg}", flush=True)


def _filesystems():
    with open("/proc/filesystems") as f:
        return {line.split()[-1] for line in f if line.strip()}


def _have_fs(name):
    """True if the kernel knows filesystem `name`, loading its module if it can."""
    if name in _filesystems():
        return True
    if shutil.which("modprobe"):
        subprocess.run(["modprobe", name], capture_output=True)
    return name in _filesystems()


def kernel_unavailable_reason(latency_ms=0):
    """None if the kernel mode can run here, else one line saying what is missing."""
    if os.geteuid() != 0:
        return "the NFS backend needs root (it starts nfsd and mounts)"
    missing = sorted({pkg for tool, pkg in TOOLS.items() if not shutil.which(tool)})
    if missing:
        return f"missing {', '.join(missing)}: apt-get install nfs-kernel-server nfs-common (tools/install-deps.sh)"
    if not _have_fs("nfsd"):
        return f"this kernel ({os.uname().release}) has no NFS server: filesystem 'nfsd' is not in /proc/filesystems " \
               "and no module could be loaded"
    if not (_have_fs("nfs4") or _have_fs("nfs")):
        return f"this kernel ({os.uname().release}) has no NFS client: 'nfs'/'nfs4' not in /proc/filesystems"
    if latency_ms > 0 and not shutil.which("tc"):
        return "--latency-ms needs tc: apt-get install iproute2"
    return None


def ganesha_unavailable_reason(latency_ms=0, client=None):
    """None if the ganesha mode can run here, else one line saying what is missing."""
    if latency_ms > 0:
        return "added latency (--latency-ms) needs the kernel mode (netem in a network namespace); " \
               "the ganesha mode adds none"
    return nfs_ganesha.unavailable_reason(client)


def mode(latency_ms=0, client=None, want="auto"):
    """"kernel", "ganesha", or None if neither can run (want: auto, kernel or ganesha)."""
    if want in ("auto", "kernel") and not kernel_unavailable_reason(latency_ms):
        return "kernel"
    if want in ("auto", "ganesha") and not ganesha_unavailable_reason(latency_ms, client):
        return "ganesha"
    return None


def unavailable_reason(latency_ms=0, client=None, want="auto"):
    """None if an NFS backend can run here, else one line saying what each mode misses."""
    if mode(latency_ms, client, want):
        return None
    reasons = {"kernel": lambda: kernel_unavailable_reason(latency_ms),
               "ganesha": lambda: ganesha_unavailable_reason(latency_ms, client)}
    if want != "auto":
        return f"{want} mode: {reasons[want]()}"
    return f"kernel mode: {reasons['kernel']()}; ganesha mode: {reasons['ganesha']()}"


def NfsMount(src, mountpoint, vers="4.2", latency_ms=0, client=None, want="auto"):  # noqa: N802 (a factory)
    """The NFS mount of `src` at `mountpoint` in the mode this machine can run (a
    context manager); raises Unavailable with every mode's reason if none can."""
    m = mode(latency_ms, client, want)
    if m == "kernel":
        return KernelNfsMount(src, mountpoint, vers, latency_ms)
    if m == "ganesha":
        return nfs_ganesha.GaneshaMount(src, mountpoint, client)
    raise Unavailable(unavailable_reason(latency_ms, client, want))


class _LatencyLink:
    """A network namespace joined to the host by a veth pair with netem delay on both ends."""

    def __init__(self, latency_ms):
        self.latency_ms = latency_ms
        k = os.getpid() % 250 + 1
        self.ns, self.host_if, self.ns_if = f"dlfsnfs{os.getpid()}", f"dnfs{os.getpid()}h", f"dnfs{os.getpid()}n"
        self.host_ip, self.ns_ip = f"10.231.{k}.1", f"10.231.{k}.2"
        self.created = False

    def up(self):
        run(["ip", "netns", "add", self.ns])
        self.created = True
        run(["ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if])
        run(["ip", "link", "set", self.ns_if, "netns", self.ns])
        run(["ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if])
        run(["ip", "link", "set", self.host_if, "up"])
        inside = ["ip", "netns", "exec", self.ns]
        run(inside + ["ip", "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if])
        run(inside + ["ip", "link", "set", self.ns_if, "up"])
        run(inside + ["ip", "link", "set", "lo", "up"])
        half = f"{self.latency_ms / 2:g}ms"
        for prefix, dev in (([], self.host_if), (inside, self.ns_if)):
            r = run(prefix + ["tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", half], check=False)
            if r.returncode != 0:
                raise Unavailable(f"tc netem on {dev} failed (kernel without CONFIG_NET_SCH_NETEM?): "
                                     f"{(r.stderr or r.stdout).strip()}")

    def down(self):
        if self.created:
            run(["ip", "link", "del", self.host_if], check=False)  # also removes the peer
            run(["ip", "netns", "del", self.ns], check=False)
            self.created = False


class KernelNfsMount(Setup):
    """`with KernelNfsMount(src, mnt) as m:` exports `src` and mounts it read-only at `mnt`.

    m.mountpoint: the NFS mount; m.run_prefix: argv prefix to run a command in the
    client's network namespace ([] without latency)."""

    def __init__(self, src, mountpoint, vers="4.2", latency_ms=0, options=MOUNT_OPTIONS):
        super().__init__()
        self.src, self.mountpoint = os.path.realpath(src), os.path.abspath(mountpoint)
        self.vers, self.latency_ms, self.options = str(vers), latency_ms, options
        self.link = _LatencyLink(latency_ms) if latency_ms > 0 else None
        self.client = self.link.ns_ip if self.link else "127.0.0.1"
        self.server = self.link.host_ip if self.link else "127.0.0.1"
        self.run_prefix = ["nsenter", f"--net=/var/run/netns/{self.link.ns}"] if self.link else []

    log = staticmethod(log)

    def unavailable_reason(self):
        return kernel_unavailable_reason(self.latency_ms)

    def _setup(self):
        if self.link:
            self.undo(self.link.down)
            self.link.up()
        self._start_server()
        self._export()
        self._mount()
        self.wait_ready()

    # -- server -------------------------------------------------------------
    def _start_server(self):
        if not os.path.ismount(NFSD_DIR):
            run(["mount", "-t", "nfsd", "nfsd", NFSD_DIR])
            self.undo(lambda: run(["umount", NFSD_DIR], check=False))
        if not _pidof("rpcbind"):
            self._spawn(["rpcbind", "-f"])
            time.sleep(0.3)
        if not _pidof("rpc.mountd"):
            self._spawn(["rpc.mountd", "-F", "--no-udp"])
        if _nfsd_threads() == 0:
            run(["rpc.nfsd", "-G", str(GRACE_S), "-L", str(GRACE_S), "8"])
            self.undo(lambda: run(["rpc.nfsd", "0"], check=False))
            log(f"started nfsd (8 threads, grace {GRACE_S} s)")

    def _spawn(self, argv):
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.undo(lambda: stop_process(p))  # stopped in reverse order of start, like every other step
        time.sleep(0.2)
        if p.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited with {p.returncode} at start")

    def _export(self):
        fsid = 7000 + os.getpid() % 1000
        spec = f"{self.client}:{self.src}"
        run(["exportfs", "-i", "-o", f"ro,no_subtree_check,no_root_squash,insecure,fsid={fsid}", spec])
        self.undo(lambda: run(["exportfs", "-u", spec], check=False))

    # -- client -------------------------------------------------------------
    def _mount(self):
        os.makedirs(self.mountpoint, exist_ok=True)
        opts = f"{self.options},vers={self.vers}" + (",nolock" if self.vers.startswith("3") else "")
        argv = self.run_prefix + ["mount", "-t", "nfs", "-o", opts, f"{self.server}:{self.src}", self.mountpoint]
        run(argv)
        self.undo(self._umount)
        log(f"mounted {self.server}:{self.src} at {self.mountpoint} ({opts}"
            + (f", +{self.latency_ms} ms round trip" if self.link else "") + ")")

    def _umount(self):
        if run(["umount", self.mountpoint], check=False).returncode != 0:
            run(["umount", "-f", "-l", self.mountpoint], check=False)

    def wait_ready(self, timeout=4 * GRACE_S + 30):
        """Opens and reads one file of the mount: returns once the server serves
        opens (an NFSv4 server in its grace period delays them)."""
        t0 = time.time()
        for root, _dirs, files in os.walk(self.mountpoint):
            if files:
                with open(os.path.join(root, files[0]), "rb") as f:
                    f.read(1)
                break
            if time.time() - t0 > timeout:
                raise RuntimeError(f"NFS mount {self.mountpoint} did not serve an open in {timeout} s")
        if time.time() - t0 > 1:
            log(f"first open took {time.time() - t0:.1f} s (server grace period)")


def _pidof(name):
    return subprocess.run(["pidof", name], capture_output=True).returncode == 0


def _nfsd_threads():
    try:
        with open(os.path.join(NFSD_DIR, "threads")) as f:
            return int(f.read().strip() or 0)
    except OSError:
        return 0


def _options(p, cmd):
    p.add_argument("--latency-ms", type=float, default=0, help="added round trip (netem, half each way; kernel mode)")
    p.add_argument("--mode", default="auto", choices=["auto", "kernel", "ganesha"],
                   help="auto: kernel where the kernel has nfsd and an NFS client, else ganesha")
    p.add_argument("--client", help=f"the ganesha mode's client (default {nfs_ganesha.default_client()})")
    if cmd != "check":
        p.add_argument("--vers", default="4.2", choices=["4.2", "4.1", "4", "3"])


def main():
    main_cli("nfs", __doc__, _options, lambda a: unavailable_reason(a.latency_ms, a.client, a.mode),
             lambda a: NfsMount(a.src, a.mountpoint, a.vers, a.latency_ms, a.client, a.mode))
