#!/usr/bin/env python3
"""Throws hostile names, sizes and offsets at a mounted dataset and checks
that each gets the right errno or the right bytes:

  - epoch, world-size and rank names: 2^64-1, 2^64, 2^32, 65536, 0, rank >= W,
    non-canonical numbers, wrong extensions (ENOENT); the largest valid ones
    resolve and read back;
  - '.' and '..' components, names longer than NAME_MAX and paths longer than
    PATH_MAX (ENAMETOOLONG);
  - backend names that are not UTF-8 or are much longer than NAME_MAX: served
    under raw/ with their bytes, and in the .index, the .tar and the directory
    view, whose every listed entry opens and reads the sample's bytes;
  - getxattr and listxattr with a 1-byte buffer (ERANGE), a size query, a
    huge buffer, unknown names (ENODATA);
  - O_DIRECT reads, mmap of a view and of a raw file, reads at and past the
    end (0 bytes), negative offsets (EINVAL), huge offsets;
  - opening for writing (EROFS or EACCES);
  - with --control-socket: control requests that are too long, too deeply
    nested or not UTF-8 get an error reply naming the errno; status still works.

Used by 18_hostile_input.sh:

  check_hostile_input.py MOUNT DATASET BACKEND [--control-socket PATH]
"""
import argparse
import codecs
import ctypes
import errno
import mmap
import json
import os
import socket
import tarfile

from checklib import fail, mount_stats

libc = ctypes.CDLL(None, use_errno=True)
BIG = 2**64 - 1
checks = 0


def expect_errno(want, what, fn, *args):
    """fn(*args) must fail with one of `want` (an errno or a tuple of them)."""
    global checks
    want = want if isinstance(want, tuple) else (want,)
    try:
        fn(*args)
    except OSError as e:
        if e.errno not in want:
            fail(f"{what}: errno {errno.errorcode.get(e.errno, e.errno)}, want {'/'.join(errno.errorcode[w] for w in want)}")
        checks += 1
        return
    fail(f"{what}: succeeded, want {'/'.join(errno.errorcode[w] for w in want)}")


def expect(cond, what):
    global checks
    if not cond:
        fail(what)
    checks += 1


def backend_files(backend):
    """{relative path (bytes): bytes} of every regular file of the backend."""
    out = {}
    root = os.fsencode(backend)
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out


def read_file(path, flags=0):
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        os.close(fd)


def check_view_names(epochs):
    """Epoch, W and rank names out of range or not canonical are ENOENT; the largest valid ones work."""
    for name in [str(BIG), str(BIG + 1), str(2**32), str(2**24), "00", "+1", "-1", "1e3", "0x1", " 1", "1 ", ""]:
        if name:
            expect_errno(errno.ENOENT, f"epochs/{name!r}", os.stat, os.path.join(epochs, name))
    expect(os.path.isdir(os.path.join(epochs, str(2**24 - 1))), "the largest epoch, 2^24-1, must resolve")
    for w in [str(BIG), str(2**32), "65536", "0", "02"]:
        expect_errno(errno.ENOENT, f"epochs/0/{w}", os.stat, os.path.join(epochs, "0", w))
    expect(os.path.isdir(os.path.join(epochs, "0", "65535")), "W = 65535 must resolve")
    w2 = os.path.join(epochs, "0", "2")
    for r in ["2.tar", "3", "65535.index", f"{BIG}.tar", f"{2**32}.tar", "00.tar", "-1.tar"]:
        expect_errno(errno.ENOENT, f"rank >= W or not canonical: {r}", os.stat, os.path.join(w2, r))
    for ext in ["0.tar.tar", "0.", ".tar", "0.TAR", "0.bin", "0.tar/", "0.index/x"]:
        expect_errno((errno.ENOENT, errno.ENOTDIR), f"extension {ext!r}", os.stat, os.path.join(w2, ext))


def check_dots_and_lengths(mnt, ds):
    root = os.path.join(mnt, ds)
    expect(os.stat(os.path.join(root, "raw", "..", "epochs")).st_ino == os.stat(os.path.join(root, "epochs")).st_ino,
           "raw/../epochs is epochs")
    expect(os.stat(os.path.join(root, "epochs", "0", "2", "0", "..", ".")).st_ino ==
           os.stat(os.path.join(root, "epochs", "0", "2")).st_ino, "a directory view's .. is its W directory")
    expect(os.listdir(os.path.join(root, "epochs", "0", "2", ".")) == os.listdir(os.path.join(root, "epochs", "0", "2")),
           "W/. lists as W")
    for where in ["raw", "epochs", "epochs/0/2", "epochs/0/2/0"]:
        d = os.path.join(root, where)
        expect_errno(errno.ENOENT, f"{where}/ + 255 bytes", os.stat, os.path.join(d, "x" * 255))
        expect_errno(errno.ENAMETOOLONG, f"{where}/ + 256 bytes", os.stat, os.path.join(d, "x" * 256))
        expect_errno(errno.ENAMETOOLONG, f"{where}/ + a 5000-byte path", os.stat, os.path.join(d, "a/" * 2500))
        expect_errno(errno.ENAMETOOLONG, f"{where}/ + a 5000-byte name", os.open, os.path.join(d, "9" * 5000), os.O_RDONLY)


def check_raw(mnt, ds, files):
    raw = os.fsencode(os.path.join(mnt, ds, "raw"))
    for rel, data in files.items():
        expect(read_file(os.path.join(raw, rel)) == data, f"raw/{rel!r}: bytes differ from the backend's")
    hostile = [rel for rel in files if not is_utf8(rel) or len(rel) > 255]
    expect(len(hostile) >= 3, "the backend should hold non-UTF-8 and long names")
    for rel in hostile:
        parent, name = os.path.split(rel)
        expect(name in os.listdir(os.path.join(raw, parent)), f"raw/{rel!r} is not listed")


def is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def index_names(path):
    """Member names of an .index, in position order (bytes)."""
    lines = read_file(path).split(b"\n")
    expect(lines[0].startswith(b"# dlfs view") and lines[-1] == b"", f"{path}: not an index")
    rows = [line.split(b"\t") for line in lines[1:-1]]
    expect(all(len(r) == 5 for r in rows), f"{path}: a line without exactly 5 fields (a name not escaped?)")
    return [codecs.escape_decode(r[4])[0] for r in rows]


def check_views(mnt, ds, files):
    """Every sample, with its name and bytes, in W=1's .index, .tar and directory view."""
    w1 = os.fsencode(os.path.join(mnt, ds, "epochs", "0", "1"))
    names = index_names(os.path.join(w1, b"0.index"))
    expect(sorted(names) == sorted(files), f".index names differ from the backend's: {sorted(names)[:3]}...")
    with tarfile.open(os.path.join(w1, b"0.tar").decode("utf-8", "surrogateescape"), "r:",
                      encoding="utf-8", errors="surrogateescape") as tar:
        members = {os.fsencode(m.name): tar.extractfile(m).read() for m in tar.getmembers()}
    expect(members == files, ".tar members differ from the backend's files (names or bytes)")
    entries = sorted(os.listdir(os.path.join(w1, b"0")))  # EIO here: a name the kernel refused
    expect(len(entries) == len(files), f"directory view lists {len(entries)} entries for {len(files)} samples")
    for k, entry in enumerate(entries):
        expect(len(entry) <= 255, f"directory view entry of {len(entry)} bytes: longer than NAME_MAX")
        expect(entry.startswith(b"%0*d-" % (len(str(len(files) - 1)), k)), f"entry {entry[:40]!r}... is not position {k}")
        expect(read_file(os.path.join(w1, b"0", entry)) == files[names[k]], f"entry {k} ({entry[:40]!r}...): wrong bytes")


def xattr_call(path, name, size):
    """getxattr(2) with a `size`-byte buffer: (return value, errno, bytes)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    n = libc.getxattr(os.fsencode(path), name.encode() if name is not None else None, buf, ctypes.c_size_t(size))
    return n, ctypes.get_errno(), buf.raw[:max(n, 0)]


def listxattr_call(path, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    n = libc.listxattr(os.fsencode(path), buf, ctypes.c_size_t(size))
    return n, ctypes.get_errno(), buf.raw[:max(n, 0)]


def check_xattrs(mnt, ds, raw_file):
    view = os.path.join(mnt, ds, "epochs", "0", "2", "1.tar")
    seed = os.getxattr(view, "user.dlfs.seed")
    expect(seed.isdigit(), f"user.dlfs.seed is {seed!r}")
    n, _, _ = xattr_call(view, "user.dlfs.seed", 0)
    expect(n == len(seed), f"getxattr size query: {n}, want {len(seed)}")
    if len(seed) > 1:
        n, err, _ = xattr_call(view, "user.dlfs.seed", 1)
        expect(n == -1 and err == errno.ERANGE, f"getxattr with a 1-byte buffer: {n}, errno {err}, want ERANGE")
    n, _, value = xattr_call(view, "user.dlfs.rank", 64 << 10)
    expect(n == 1 and value == b"1", f"getxattr with a 64 KiB buffer: {n} {value!r}, want b'1'")
    n, err, _ = listxattr_call(view, 1)
    expect(n == -1 and err == errno.ERANGE, f"listxattr with a 1-byte buffer: {n}, errno {err}")
    n, _, names = listxattr_call(view, 1 << 20)
    expect(b"user.dlfs.seed\0" in names and n == len(names), f"listxattr: {names!r}")
    for path, name in [(view, "user.nope"), (view, "user." + "x" * 250), (view, "trusted.dlfs.seed"),
                       (raw_file, "user.dlfs.seed"), (os.path.join(mnt, ds), "user.dlfs.seed")]:
        expect_errno(errno.ENODATA, f"getxattr {name[:20]} on {os.path.basename(path)}", os.getxattr, path, name)
    expect_errno(errno.ERANGE, "getxattr with a name longer than XATTR_NAME_MAX", os.getxattr, view, "user." + "x" * 300)


def aligned_pread(fd, size, offset):
    buf = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT wants
    try:
        n = os.preadv(fd, [buf], offset)
        return buf[:n]
    finally:
        buf.close()


def check_io(path, data, what):
    """O_DIRECT, mmap, reads at and past the end, negative and huge offsets, against `data`."""
    size = len(data)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        expect(aligned_pread(fd, 1 << 20, 0) == data[:1 << 20], f"{what}: O_DIRECT read at 0")
        expect(aligned_pread(fd, 8192, 4096) == data[4096:4096 + 8192], f"{what}: O_DIRECT read at 4096")
    finally:
        os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    try:
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as m:
            expect(m[:] == data, f"{what}: bytes through mmap differ")
        expect(os.pread(fd, 100, size) == b"", f"{what}: read at the end is not empty")
        expect(os.pread(fd, 100, size + 12345) == b"", f"{what}: read past the end is not empty")
        expect(os.pread(fd, 1 << 20, 2**62) == b"", f"{what}: read at 2^62 is not empty")
        expect(os.pread(fd, 100, 2**63 - 101) == b"", f"{what}: read just below 2^63 is not empty")
        expect(os.pread(fd, 64 << 20, size - 1) == data[-1:], f"{what}: 64 MiB read of the last byte")
        expect_errno(errno.EINVAL, f"{what}: pread at -1", os.pread, fd, 10, -1)
        expect_errno(errno.EINVAL, f"{what}: lseek to -1", os.lseek, fd, -1, os.SEEK_SET)
        os.lseek(fd, 2**62, os.SEEK_SET)
        expect(os.read(fd, 4096) == b"", f"{what}: read after seeking to 2^62 is not empty")
    finally:
        os.close(fd)
    for flags in [os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND]:
        expect_errno((errno.EROFS, errno.EACCES), f"{what}: open with flags {flags:#o}", os.open, path, flags)


def control_request(path, payload):
    """Sends raw bytes on a new control connection; returns the final reply line as JSON."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon answered and hung up before reading it all
        reply = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break  # the daemon closed with our request unread: its reply came before
            if not b:
                break
            reply += b
    lines = reply.split(b"\n")
    expect(len(lines) >= 2 and lines[-1] == b"", f"control reply is not newline-terminated lines: {reply[:200]!r}")
    return json.loads(lines[-2])


def check_control(path):
    for payload, err, what in [(b"x" * (2 << 20), errno.EMSGSIZE, "a 2 MiB line"),
                               (b"[" * 500000 + b"\n", errno.EINVAL, "500000 nested arrays"),
                               (b'{"cmd": "\xff\xfe"}\n', errno.EINVAL, "a request that is not UTF-8"),
                               (b'{"cmd": "status", "cmd": 7}\n', errno.EINVAL, "a duplicate cmd of another type"),
                               (b"\n", errno.EINVAL, "an empty line")]:
        r = control_request(path, payload)
        expect(r.get("ok") is False and r.get("errno") == err and r.get("error"),
               f"control socket, {what}: {json.dumps(r)[:200]}, want errno {errno.errorcode[err]}")
    r = control_request(path, b'{"cmd": "status"}\n')
    expect(r.get("ok") is True and "datasets" in r.get("result", {}), f"status after hostile requests: {r}")


def check_many_views(mnt, ds):
    """More distinct views than inode numbers for views (65,535): the numbers
    of views the kernel forgot are recycled, and a recycled number serves the
    view it now names (the .index header says which). Dropping the dentry
    cache every 20,000 views makes the kernel forget them."""
    n, drop_every = 70_000, 20_000
    for e in range(n):
        os.stat(os.path.join(mnt, ds, "epochs", str(e), "1", "0.index"))
        if e % drop_every == drop_every - 1:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("2\n")
    ids = mount_stats(mnt)["datasets"][0]["views"]["ids"]
    expect(ids["recycled"] > 0 and ids["in_use"] <= 65535, f"view ids after {n} distinct views: {ids}")
    for e in (n - 1, 3, 40_000):  # new, recycled away and back, in between
        head = read_file(os.path.join(mnt, ds, "epochs", str(e), "1", "0.index")).split(b"\n", 1)[0]
        expect(f" epoch={e} ".encode() in head, f"epoch {e}'s .index says {head[:80]!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mount")
    ap.add_argument("dataset")
    ap.add_argument("backend")
    ap.add_argument("--control-socket", help="also send hostile control requests here")
    args = ap.parse_args()
    mnt, ds = args.mount, args.dataset
    files = backend_files(args.backend)
    check_view_names(os.path.join(mnt, ds, "epochs"))
    check_dots_and_lengths(mnt, ds)
    check_raw(mnt, ds, files)
    check_views(mnt, ds, files)
    big = max(files, key=lambda rel: len(files[rel]))
    raw_big = os.path.join(os.fsencode(os.path.join(mnt, ds, "raw")), big)
    check_xattrs(mnt, ds, raw_big)
    check_io(raw_big, files[big], "raw file")
    tar = os.path.join(mnt, ds, "epochs", "0", "1", "0.tar")
    check_io(tar, read_file(tar), "the W=1 tar view")
    expect_errno((errno.EROFS, errno.EACCES), "creating a file in raw/", os.open,
               os.path.join(mnt, ds, "raw", "new"), os.O_WRONLY | os.O_CREAT, 0o644)
    check_many_views(mnt, ds)
    if args.control_socket:
        check_control(args.control_socket)
    print(f"{checks} checks passed")


if __name__ == "__main__":
    main()
