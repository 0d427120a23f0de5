"""A real network-filesystem backend for the benchmarks that runs on kernels
without NFS: sshfs (FUSE + SFTP) over loopback. The script starts its own sshd,
mounts the directory read-only with sshfs, and tears both down afterwards, also
on errors and signals (`SshfsMount` is a context manager; the CLI turns
SIGTERM/SIGHUP into a normal exit). The system's sshd, if any, is not touched.

Server: `/usr/sbin/sshd -D -e -f <config>` with a config of its own, written into a
temporary directory together with a fresh ed25519 host key and client key
(ssh-keygen): listens on 127.0.0.1 only, on a free port; public-key login only
(`AuthorizedKeysFile` in that directory, `PermitRootLogin prohibit-password`,
`AllowUsers` the current user, no PAM, `StrictModes no` because the keys live
under /tmp); SFTP is sshd's `internal-sftp`. sshd needs its privilege separation
directory /run/sshd, normally made by its init script: created if missing and
removed afterwards. The directory with the keys is deleted at teardown.

Client: `sshfs -f root@127.0.0.1:SRC MNT -F /dev/null -o ro,port=..,IdentityFile=..,
StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null` plus `CACHE_OPTIONS`, chosen
to cost what a cluster's NFS client costs per file (close-to-open consistency with
the kernel's default attribute caching, as in nfs.py):
  - every open() is an SFTP OPEN and every close an SFTP CLOSE: sshfs has no open
    cache, so each open costs a round trip to the server, as NFSv4's OPEN does;
  - `auto_cache`: the page cache of a file is kept across opens while its mtime and
    size stay the same (checked at open when the attributes are older than
    attr_timeout), NFS's close-to-open rule, instead of being dropped at every open;
  - `attr_timeout=3`: file attributes cached 3 s (NFS acregmin);
    `entry_timeout=30`: names cached 30 s (NFS revalidates a name with its
    directory's attributes, acdirmin 30 s); `negative_timeout=0`;
  - `dir_cache=no`: no cache of names and attributes inside sshfs itself, so a
    lookup the kernel does not have cached costs an SFTP LSTAT round trip, as a
    LOOKUP does on NFS after `drop_caches` (sshfs's own cache would survive it).
What it does not model: sshfs is a FUSE daemon in user space speaking SFTP over one
encrypted SSH connection (one sshd process: requests are serialized through it and
pay for the cipher), while NFS is a kernel client with several connections
(nconnect), no encryption, READDIRPLUS and a larger read size. Per-file round trips
are alike; bandwidth and per-request CPU are not.

Requirements: root, /dev/fuse, Debian's sshfs and openssh-server (only its sshd
binary is used). `unavailable_reason()` says what is missing.

CLI:
  sshfs_backend.py check                        exit 0 if usable, 77 with the reason if not
  sshfs_backend.py mount SRC MNT                mount, wait for SIGINT/SIGTERM, tear down
  sshfs_backend.py run SRC MNT -- CMD ...       run CMD with the mount present, tear down
"""
import os
import pwd
import shutil
import subprocess
import tempfile
import time

from .common import Setup, free_port, log_tail, main_cli, run, stop_process, unmount_fuse, wait_listening, wait_mounted

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = "/run/sshd"
CACHE_OPTIONS = "auto_cache,attr_timeout=3,entry_timeout=30,negative_timeout=0,dir_cache=no"
TOOLS = {"sshfs": "sshfs", "fusermount3": "fuse3", SSHD: "openssh-server", "ssh-keygen": "openssh-client",
         "ssh": "openssh-client"}


def log(msg):
    print(f"[sshfs] {msg}", flush=True)


def unavailable_reason():
    """None if the sshfs backend can run here, else one line saying what is missing."""
    if os.geteuid() != 0:
        return "the sshfs backend needs root (it starts an sshd and mounts)"
    missing = sorted({pkg for tool, pkg in TOOLS.items() if not shutil.which(tool)})
    if missing:
        return f"missing {', '.join(missing)}: apt-get install {' '.join(missing)} (tools/install-deps.sh)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse: this machine cannot mount FUSE filesystems"
    return None


def _children(pid):
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _stop_sshd(p, timeout=5):
    """Stops sshd once its session processes are gone (they end when sshfs's connection
    closes): stopped first, they would be left to init."""
    t0 = time.time()
    while p.poll() is None and _children(p.pid) and time.time() - t0 < timeout:
        time.sleep(0.05)
    stop_process(p)


class SshfsMount(Setup):
    """`with SshfsMount(src, mnt) as m:` serves `src` with a private sshd and mounts it
    read-only at `mnt` with sshfs. m.mountpoint: the mount; m.options: sshfs's -o;
    m.run_prefix: [] (readers need no namespace)."""

    log = staticmethod(log)

    def __init__(self, src, mountpoint, cache_options=CACHE_OPTIONS):
        super().__init__()
        self.src, self.mountpoint = os.path.realpath(src), os.path.abspath(mountpoint)
        self.cache_options = cache_options
        self.user = pwd.getpwuid(os.geteuid()).pw_name
        self.run_prefix = []
        self.dir = self.port = self.options = None

    def unavailable_reason(self):
        return unavailable_reason()

    def _setup(self):
        self.dir = tempfile.mkdtemp(prefix="dlfs-sshfs-")
        self.undo(lambda: shutil.rmtree(self.dir, ignore_errors=True))
        self._keys()
        self._start_sshd()
        self._mount()

    # -- server -------------------------------------------------------------
    def _keys(self):
        for name in ("host_key", "client_key"):
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"dlfs-bench-{name}",
                 "-f", os.path.join(self.dir, name)])
        shutil.copy(os.path.join(self.dir, "client_key.pub"), os.path.join(self.dir, "authorized_keys"))

    def _write_config(self):
        path = os.path.join(self.dir, "sshd_config")
        with open(path, "w") as f:
            f.write(f"""# written by tools/bench/benchlib/backends/sshfs.py for one benchmark run
ListenAddress 127.0.0.1
Port {self.port}
HostKey {self.dir}/host_key
PidFile none
AuthorizedKeysFile {self.dir}/authorized_keys
AllowUsers {self.user}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# the keys live under /tmp, which is world-writable: StrictModes would refuse them
StrictModes no
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
UseDNS no
Subsystem sftp internal-sftp
""")
        return path

    def _start_sshd(self, attempts=3):
        if not os.path.isdir(PRIVSEP_DIR):
            os.makedirs(PRIVSEP_DIR, mode=0o755)
            self.undo(lambda: os.rmdir(PRIVSEP_DIR))
        for attempt in range(attempts):  # the free port may be taken between _free_port and sshd's bind
            self.port = free_port()
            conf = self._write_config()
            run([SSHD, "-t", "-f", conf])  # a config error is reported as such
            sshd_log = os.path.join(self.dir, "sshd.log")
            with open(sshd_log, "w") as out:
                p = subprocess.Popen([SSHD, "-D", "-e", "-f", conf], stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                     start_new_session=True)  # a terminal's Ctrl-C reaches us, we stop it in order
            self.undo(lambda p=p: _stop_sshd(p))
            if wait_listening(self.port, p, timeout=10):
                log(f"sshd (pid {p.pid}) on 127.0.0.1:{self.port}")
                return
            if attempt == attempts - 1:
                raise RuntimeError(f"sshd did not start on 127.0.0.1:{self.port}: {log_tail(sshd_log)}")

    # -- client -------------------------------------------------------------
    def _mount(self, timeout=30):
        os.makedirs(self.mountpoint, exist_ok=True)
        if os.path.ismount(self.mountpoint):
            raise RuntimeError(f"{self.mountpoint} is already a mount point")
        self.options = (f"ro,port={self.port},IdentityFile={self.dir}/client_key,IdentitiesOnly=yes,BatchMode=yes,"
                        f"StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR,{self.cache_options}")
        client_log = os.path.join(self.dir, "sshfs.log")
        with open(client_log, "w") as out:
            p = subprocess.Popen(["sshfs", "-f", f"{self.user}@127.0.0.1:{self.src}", self.mountpoint,
                                  "-F", "/dev/null", "-o", self.options],
                                 stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
        self.undo(lambda: self._umount(p))
        wait_mounted(self.mountpoint, p, "sshfs", client_log, timeout)
        os.listdir(self.mountpoint)  # one SFTP round trip: the session serves requests
        log(f"mounted 127.0.0.1:{self.src} at {self.mountpoint} (sshfs -o {self.options})")

    def _umount(self, p):
        unmount_fuse(self.mountpoint, p)


def _options(_p, _cmd):
    pass


def main():
    main_cli("sshfs", __doc__, _options, lambda _a: unavailable_reason(), lambda a: SshfsMount(a.src, a.mountpoint))
