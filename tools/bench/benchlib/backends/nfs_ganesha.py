"""The NFS backend's user-space mode (nfs.py uses it where the kernel has
no nfsd or no NFS client): Debian's nfs-ganesha serves the directory over NFSv4
on 127.0.0.1, and dlfs-bench-nfsmount (tools/bench/nfs_fuse_client.cc, libnfs
under FUSE) mounts it read-only. Both are torn down afterwards, also on errors
and signals (`GaneshaMount` is a `common.Setup`).

Server: `ganesha.nfsd -F -f <config>` with a config of its own, written into a
temporary directory with its log, pid file and NFSv4 recovery directory (so
nothing of the system's /var/lib/nfs is used): NFSv4 only, TCP, 127.0.0.1 on a
free port (no rpcbind: the client is given the port), `Graceless` (no grace
period after start), numeric owners (uids as numbers, no idmapping), one export
of SRC at pseudo path /data, read-only, `No_Root_Squash`, AUTH_SYS, FSAL VFS.
Ganesha logs that it has no D-Bus and no Kerberos keytab: harmless here.

Client: `dlfs-bench-nfsmount nfs://127.0.0.1/data?version=4&nfsport=<port> MNT`
(NFSv4.0: libnfs 4.0 speaks no 4.1). Its caching copies the Linux NFS client's
defaults: attributes 3 s, names 30 s, close-to-open (an OPEN and a CLOSE per
open file), page cache kept while mtime and size are unchanged, reads straight
to READ; see the header of nfs_fuse_client.cc. What it does not model: the FUSE
hop to the client process, which the kernel's client does not have, nconnect,
NFSv4.1 sessions and delegations.

No added latency: that needs netem, which this mode does not set up (and which
the kernels this mode is for lack too); nfs.py reports latency_ms > 0 as
unavailable here.
"""
import os
import shutil
import subprocess
import tempfile

from .. import SRC
from .common import Setup, free_port, log_tail, stop_process, unmount_fuse, wait_listening, wait_mounted

GANESHA = "/usr/bin/ganesha.nfsd"
PSEUDO = "/data"
CLIENT_NAME = "dlfs-bench-nfsmount"
# Where Debian's nfs-ganesha-vfs puts the VFS FSAL (ganesha loads FSALs from its plugin dir).
FSAL_VFS = ("/usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so", "/usr/lib/aarch64-linux-gnu/ganesha/libfsalvfs.so",
            "/usr/lib/ganesha/libfsalvfs.so")


def log(msg):
    print(f"[nfs] {msg}", flush=True)


def default_client():
    """The client from the environment (DLFS_BENCH_NFSMOUNT) or from <source>/build."""
    return os.environ.get("DLFS_BENCH_NFSMOUNT") or os.path.join(SRC, "build/tools/bench", CLIENT_NAME)


def unavailable_reason(client=None):
    """None if the ganesha mode can run here, else one line saying what is missing."""
    client = client or default_client()
    if os.geteuid() != 0:
        return "the NFS backend needs root (it starts ganesha.nfsd and mounts)"
    missing = []
    if not os.access(GANESHA, os.X_OK):
        missing.append("nfs-ganesha")
    if not any(os.path.exists(p) for p in FSAL_VFS):
        missing.append("nfs-ganesha-vfs")
    if not shutil.which("fusermount3"):
        missing.append("fuse3")
    if missing:
        return f"missing {', '.join(missing)}: apt-get install {' '.join(missing)} (tools/install-deps.sh)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse: the user-space NFS client cannot mount"
    if not os.access(client, os.X_OK):
        return f"no NFS client binary {client}: build it (meson builds tools/bench/{CLIENT_NAME} when libnfs-dev " \
               "is installed) or set DLFS_BENCH_NFSMOUNT"
    return None


def _tail(path):
    """The last lines of ganesha's log, without its expected D-Bus/Kerberos complaints."""
    return log_tail(path, skip=("DBUS", "krb5", "keytab", "gssd"))


class GaneshaMount(Setup):
    """`with GaneshaMount(src, mnt) as m:` serves `src` with a private ganesha.nfsd and
    mounts it read-only at `mnt` with dlfs-bench-nfsmount. m.options: the client's URL;
    m.run_prefix: [] (readers need no namespace)."""

    log = staticmethod(log)

    def __init__(self, src, mountpoint, client=None):
        super().__init__()
        self.src, self.mountpoint = os.path.realpath(src), os.path.abspath(mountpoint)
        self.client = client or default_client()
        self.run_prefix = []
        self.dir = self.port = self.options = None
        self.server = None

    def unavailable_reason(self):
        return unavailable_reason(self.client)

    def _setup(self):
        self.dir = tempfile.mkdtemp(prefix="dlfs-ganesha-")
        self.undo(lambda: shutil.rmtree(self.dir, ignore_errors=True))
        self._start_server()
        self._mount()

    # -- server -------------------------------------------------------------
    def _write_config(self):
        path = os.path.join(self.dir, "ganesha.conf")
        recovery = os.path.join(self.dir, "recovery")
        os.makedirs(recovery, exist_ok=True)
        with open(path, "w") as f:
            f.write(f"""# written by tools/bench/benchlib/backends/nfs_ganesha.py for one benchmark run
NFS_CORE_PARAM {{
  Protocols = 4; NFS_Port = {self.port}; Bind_addr = 127.0.0.1;
  Enable_NLM = false; Enable_RQUOTA = false;
}}
NFSV4 {{
  Graceless = true;
  Only_Numeric_Owners = true;
  RecoveryBackend = fs; RecoveryRoot = "{recovery}";
}}
EXPORT {{
  Export_Id = 1; Path = "{self.src}"; Pseudo = {PSEUDO};
  Access_Type = RO; Squash = No_Root_Squash; Protocols = 4; Transports = TCP; SecType = sys;
  FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = WARN; }}
""")
        return path

    def _start_server(self, attempts=3):
        for attempt in range(attempts):  # the free port may be taken before ganesha binds it
            self.port = free_port()
            conf = self._write_config()
            glog = os.path.join(self.dir, "ganesha.log")
            p = subprocess.Popen([GANESHA, "-F", "-f", conf, "-L", glog, "-p", os.path.join(self.dir, "ganesha.pid")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                 start_new_session=True)  # a terminal's Ctrl-C reaches us, we stop it in order
            self.undo(lambda p=p: stop_process(p))
            if wait_listening(self.port, p, timeout=20):
                self.server = p
                log(f"ganesha.nfsd (pid {p.pid}) serves {self.src} as 127.0.0.1:{self.port}{PSEUDO} (NFSv4, ro)")
                return
            if attempt == attempts - 1:
                raise RuntimeError(f"ganesha.nfsd did not start on 127.0.0.1:{self.port} "
                                   f"({'exit ' + str(p.returncode) if p.poll() is not None else 'timeout'}): "
                                   f"{_tail(glog)}")

    # -- client -------------------------------------------------------------
    def _mount(self, timeout=30):
        os.makedirs(self.mountpoint, exist_ok=True)
        if os.path.ismount(self.mountpoint):
            raise RuntimeError(f"{self.mountpoint} is already a mount point")
        self.options = f"nfs://127.0.0.1{PSEUDO}?version=4&nfsport={self.port}"
        client_log = os.path.join(self.dir, "client.log")
        with open(client_log, "w") as out:
            p = subprocess.Popen([self.client, self.options, self.mountpoint], stdout=out, stderr=out,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        self.undo(lambda: self._umount(p))
        wait_mounted(self.mountpoint, p, f"{CLIENT_NAME} ({self.options})", client_log, timeout)
        os.listdir(self.mountpoint)  # one READDIR: the export serves requests
        log(f"mounted {self.options} at {self.mountpoint} ({CLIENT_NAME}, pid {p.pid})")

    def _umount(self, p):
        unmount_fuse(self.mountpoint, p)
