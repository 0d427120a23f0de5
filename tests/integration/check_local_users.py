#!/usr/bin/env python3
"""Issue 32 through a real mount: nobody reads through DLFS what they cannot
read on the backend. What an unprivileged user can do on the BACKEND is
compared with what that user can do through the MOUNT (a root dlfsd with
allow_other and the raw overlay), each user's operations run in a child
process started with setpriv (numeric ids, no capabilities left).

Used by 38_local_users.sh:

  check_local_users.py make-tfrecord DIR FILES RECORDS SEED
      FILES TFRecord files of RECORDS random records each (CRC32C computed here).
  check_local_users.py make-shards DIR SHARDS KEYS SEED
      SHARDS WebDataset tar shards of KEYS keys each (<key>.jpg, <key>.cls).
  check_local_users.py check --mnt MNT --work WORK --datasets A,B,...
      for every dataset (backend WORK/<name>, served as MNT/<name>):
      - as root, raw/ shows the backend's type, owner, group and mode & 0555,
        and every raw file's bytes are the backend's;
      - for each user (outsider 60001:60001 without groups; member 60002:60002
        in group 60010), every stat, listing and read in raw/ ends as the
        same operation on the backend does (same errno, same bytes, same names);
      - as root, every epoch view (epochs/ listings, <r>.tar, .index, .bin,
        .tfrecord, the directory view <r>/ and its entries, xattrs, an
        unlisted epoch/world size) reads, and carries the expected owner,
        group and mode (files: the mode's read bits; directories: r-x where
        the files have r);
      - a user who may read the views (EXPECT) gets every view operation with
        root's result (bytes, names, attributes, xattrs); any other user gets
        EACCES from every one of them;
      - for datasets with view_* keys (explicit, owned: 0644 backends), every
        user still reads every raw/ file;
      - for datasets without view_* keys, the users who may read the views are
        exactly those who can read every file of the backend (found by the
        backend probes: the harness checks its own table);
      - the closed dataset's named cases (0600 file: stat yes, open EACCES;
        file in a 0700 directory: EACCES on stat; the 0700 directory's listing:
        EACCES; a public file: root's bytes);
      - MNT/.dlfs/stats: as root it names WORK/closed; as the outsider it is
        JSON and names neither WORK/closed nor any file or directory name of
        the closed dataset's or of the group dataset's backend.
  dlfs-ctl status --json | check_local_users.py status --datasets A,B,...
      every dataset has "access": {"owner", "group" (numbers), "mode" (a
      string such as "0440"), "readers", "why" (text)} with the expected
      owner, group and mode.
  check_local_users.py probe
      (run as the user) JSON operations on stdin, their results on stdout.

Prints one line per property ("ok: ..." or "FAIL: ..."), goes on after a
failure, and exits 1 if any property failed.
"""
import errno
import hashlib
import io
import json
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
import tarfile

# The users of the scenario: numeric ids, no /etc/passwd entries needed.
GROUP = 60010
USERS = {"outsider": (60001, 60001, []), "member": (60002, 60002, [GROUP])}

# name: (views' owner, group, mode, users who may read the views). Owner and
# group default to the backend root directory's (root:root here, root:60010
# for group); the mode gives a class read when every file of the dataset is
# readable by that class on the backend.
EXPECT = {
    "open": (0, 0, 0o444, {"outsider", "member"}),
    "closed": (0, 0, 0o400, set()),
    "modes": (0, 0, 0o444, {"outsider", "member"}),
    "fixed_open": (0, 0, 0o444, {"outsider", "member"}),
    "fixed_closed": (0, 0, 0o400, set()),
    "lmdb_open": (0, 0, 0o444, {"outsider", "member"}),
    "lmdb_closed": (0, 0, 0o400, set()),
    "tf_open": (0, 0, 0o444, {"outsider", "member"}),
    "tf_closed": (0, 0, 0o400, set()),
    "wds_open": (0, 0, 0o444, {"outsider", "member"}),
    "wds_closed": (0, 0, 0o400, set()),
    "group": (0, GROUP, 0o440, {"member"}),
    # Explicit keys: view_group = "60010", view_mode = "0440" over 0644 files.
    "explicit": (0, GROUP, 0o440, {"member"}),
    # Explicit keys: view_owner = "60001", view_mode = "0400" over 0644 files.
    "owned": (60001, 0, 0o400, {"outsider"}),
}
EXPLICIT_KEYS = {"explicit", "owned"}  # their view access is configured, not derived from the backend

# The closed dataset's named cases (raw/ paths): what the outsider gets.
CLOSED_CASES = [
    ("stat", "closed-only-root.bin", 0, "the 0600 root file: stat works"),
    ("read", "closed-only-root.bin", errno.EACCES, "the 0600 root file: open -> EACCES"),
    ("stat", "closed-hidden-dir/closed-hidden-file.bin", errno.EACCES, "the 0644 file in a 0700 dir: stat -> EACCES"),
    ("read", "closed-hidden-dir/closed-hidden-file.bin", errno.EACCES, "the 0644 file in a 0700 dir: open -> EACCES"),
    ("list", "closed-hidden-dir", errno.EACCES, "ls of the 0700 dir -> EACCES"),
    ("read", "closed-public/closed-pub-00.bin", 0, "a 0644 file in 0755 dirs reads"),
]

FAILED = []


def ok(msg):
    print("ok: " + msg, flush=True)


def bad(msg):
    FAILED.append(msg)
    print("FAIL: " + msg, flush=True)


def prop(cond, good, wrong):
    (ok if cond else bad)(good if cond else wrong)


# ---- the probe: run as root in-process, as a user through setpriv --------

def whoami():
    cap = "?"
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                cap = line.split()[1]
    return {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "egid": os.getegid(),
            "groups": sorted(os.getgroups()), "cap_eff": cap}


def probe_one(op):
    kind, path = op["op"], op.get("path")
    if kind == "whoami":
        return whoami()
    stage = kind
    r = {}
    try:
        if kind == "stat":
            st = os.lstat(path)
            r.update(mode=st.st_mode, uid=st.st_uid, gid=st.st_gid,
                     size=st.st_size if stat.S_ISREG(st.st_mode) else None)
        elif kind == "list":
            r["names"] = sorted(os.listdir(path))
        elif kind in ("read", "text"):
            stage = "open"
            fd = os.open(path, os.O_RDONLY)
            try:
                stage = "read"
                h, size, chunks = hashlib.sha256(), 0, []
                while True:
                    b = os.read(fd, 1 << 20)
                    if not b:
                        break
                    h.update(b)
                    size += len(b)
                    if kind == "text":
                        chunks.append(b)
            finally:
                os.close(fd)
            r.update(sha=h.hexdigest(), size=size)
            if kind == "text":
                r["text"] = b"".join(chunks).decode("utf-8", "replace")
        elif kind == "xattrs":
            stage = "listxattr"
            names = sorted(os.listxattr(path))
            stage = "getxattr"
            r["xattrs"] = {n: os.getxattr(path, n).hex() for n in names}
        elif kind == "getxattr":
            r["value"] = os.getxattr(path, op["name"]).hex()
        else:
            raise ValueError(f"unknown probe operation {kind!r}")
    except OSError as e:
        return {"errno": e.errno, "stage": stage}
    r["errno"] = 0
    return r


def probe_main():
    ops = json.load(sys.stdin)
    json.dump([probe_one(op) for op in ops], sys.stdout)


class Runner:
    """Runs batches of operations as root (here) or as a user (setpriv)."""

    def __init__(self, work):
        self.work = work
        self.script = os.path.join(work, "probe-local-users.py")
        shutil.copyfile(os.path.abspath(__file__), self.script)
        os.chmod(self.script, 0o644)

    def run(self, user, ops):
        if user == "root":
            return [probe_one(op) for op in ops]
        uid, gid, groups = USERS[user]
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}"]
        cmd += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
        cmd += [sys.executable, "-I", self.script, "probe"]
        p = subprocess.run(cmd, input=json.dumps(ops), capture_output=True, text=True, cwd=self.work, timeout=120)
        if p.returncode != 0:
            raise SystemExit(f"FAIL: the probe as {user} exited {p.returncode}: {p.stderr.strip()}")
        return json.loads(p.stdout)


def errname(e):
    return "ok" if e == 0 else errno.errorcode.get(e, str(e))


def describe(r):
    if r.get("errno"):
        return f"{errname(r['errno'])} at {r.get('stage')}"
    keys = [k for k in ("sha", "names", "xattrs", "value", "mode") if k in r]
    return "ok (" + ", ".join(f"{k}={str(r[k])[:40]}" for k in keys) + ")"


# ---- the datasets -------------------------------------------------------

def backend_entries(backend):
    """(dirs, files): paths relative to the backend root ('' is the root), sorted."""
    dirs, files = [""], []
    for top, dnames, fnames in os.walk(backend):
        rel = os.path.relpath(top, backend)
        rel = "" if rel == "." else rel
        dnames.sort()
        dirs += [os.path.join(rel, d) for d in dnames]
        files += [os.path.join(rel, f) for f in sorted(fnames)]
    return sorted(dirs), sorted(files)


def raw_ops(base, dirs, files):
    ops = []
    for d in dirs:
        p = os.path.join(base, d) if d else base
        ops += [{"op": "stat", "path": p}, {"op": "list", "path": p}]
    for f in files:
        p = os.path.join(base, f)
        ops += [{"op": "stat", "path": p}, {"op": "read", "path": p}]
    return ops


def same_outcome(a, b, compare_attrs):
    if a.get("errno") != b.get("errno"):
        return False
    if a.get("errno"):
        return True
    for k in ("sha", "size", "names", "xattrs", "value"):
        if a.get(k) != b.get(k):
            return False
    if compare_attrs:
        return all(a.get(k) == b.get(k) for k in ("mode", "uid", "gid", "size"))
    return True


def check_raw(run, mnt, work, name, users):
    backend = os.path.join(work, name)
    raw = os.path.join(mnt, name, "raw")
    dirs, files = backend_entries(backend)
    # As root: the backend's type, owner, group, mode & 0555; the bytes.
    wrong = []
    for rel in dirs + files:
        b = os.lstat(os.path.join(backend, rel) if rel else backend)
        try:
            m = os.lstat(os.path.join(raw, rel) if rel else raw)
        except OSError as e:
            wrong.append(f"raw/{rel}: {errname(e.errno)}")
            continue
        want = (stat.S_IFMT(b.st_mode), b.st_uid, b.st_gid, stat.S_IMODE(b.st_mode) & 0o555)
        got = (stat.S_IFMT(m.st_mode), m.st_uid, m.st_gid, stat.S_IMODE(m.st_mode))
        if want != got:
            wrong.append(f"raw/{rel}: uid {got[1]} gid {got[2]} mode {got[3]:04o}, "
                         f"backend uid {want[1]} gid {want[2]} mode {stat.S_IMODE(b.st_mode):04o} (& 0555: {want[3]:04o})")
    prop(not wrong, f"{name}: raw/ shows the backend's owner, group and mode & 0555 ({len(dirs) + len(files)} entries)",
         f"{name}: raw/ attributes are not the backend's: " + "; ".join(wrong[:6]) +
         (f" (+{len(wrong) - 6} more)" if len(wrong) > 6 else ""))
    rb = run.run("root", raw_ops(backend, dirs, files))
    rm = run.run("root", raw_ops(raw, dirs, files))
    diff = [o["path"] for o, x, y in zip(raw_ops(raw, dirs, files), rb, rm) if not same_outcome(x, y, False)]
    prop(not diff, f"{name}: root reads raw/ as the backend ({len(files)} files, bytes equal)",
         f"{name}: root's raw/ differs from the backend at: {diff[:6]}")

    # Each user: every operation on raw/ ends as the same one on the backend.
    readable = {}
    for user in users:
        ob = run.run(user, raw_ops(backend, dirs, files))
        om = run.run(user, raw_ops(raw, dirs, files))
        ops = raw_ops(raw, dirs, files)
        diff = [f"{o['op']} {os.path.relpath(o['path'], raw)}: backend {describe(x)}, mount {describe(y)}"
                for o, x, y in zip(ops, ob, om) if not same_outcome(x, y, False)]
        reads = [x for o, x in zip(ops, ob) if o["op"] == "read"]
        n_ok = sum(1 for x in reads if x["errno"] == 0)
        n_acc = sum(1 for x in reads if x["errno"] == errno.EACCES)
        readable[user] = n_ok == len(files)
        if name in EXPLICIT_KEYS:
            n_mnt = sum(1 for o, y in zip(ops, om) if o["op"] == "read" and y["errno"] == 0)
            prop(n_mnt == len(files), f"{name}: {user} reads all {len(files)} raw/ files (raw/ keeps the backend's "
                                      f"modes whatever the view_* keys say)",
                 f"{name}: {user} reads {n_mnt} of {len(files)} raw/ files, want all (0644 on the backend)")
        prop(not diff, f"{name}: {user} gets through raw/ what it gets on the backend "
                       f"({n_ok} of {len(files)} files read with the backend's bytes, {n_acc} EACCES)",
             f"{name}: {user}: raw/ differs from the backend: " + "; ".join(diff[:6]) +
             (f" (+{len(diff) - 6} more)" if len(diff) > 6 else ""))
        if name == "closed" and user == "outsider":
            for kind, rel, want, what in CLOSED_CASES:
                r = run.run(user, [{"op": kind, "path": os.path.join(raw, rel)}])[0]
                rbk = run.run(user, [{"op": kind, "path": os.path.join(backend, rel)}])[0]
                prop(r["errno"] == want and rbk["errno"] == want and (want or same_outcome(r, rbk, False)),
                     f"closed: outsider, raw/{rel}: {what} (backend: {errname(rbk['errno'])})",
                     f"closed: outsider, raw/{rel}: want {errname(want)} ({what}); mount {describe(r)}, "
                     f"backend {describe(rbk)}")
    return readable


def view_ops(mnt, name):
    """The view operations of a dataset, from what root lists in epochs/0/1/."""
    ds = os.path.join(mnt, name)
    ep = os.path.join(ds, "epochs")
    ops = [{"op": "list", "path": ep}, {"op": "list", "path": os.path.join(ep, "0")},
           {"op": "list", "path": os.path.join(ep, "0", "1")}]
    try:
        names = sorted(os.listdir(os.path.join(ep, "0", "1")))
    except OSError as e:
        bad(f"{name}: root cannot list epochs/0/1: {errname(e.errno)}")
        return ops, []
    for n in names:
        p = os.path.join(ep, "0", "1", n)
        ops += [{"op": "stat", "path": p}, {"op": "xattrs", "path": p},
                {"op": "getxattr", "path": p, "name": "user.dlfs.seed"}]
        if os.path.isdir(p):
            ops.append({"op": "list", "path": p})
            for e in sorted(os.listdir(p))[:3]:
                ops += [{"op": "stat", "path": os.path.join(p, e)}, {"op": "read", "path": os.path.join(p, e)},
                        {"op": "xattrs", "path": os.path.join(p, e)}]
        else:
            ops.append({"op": "read", "path": p})
    # Not listed, exists when looked up: epoch 2, world size 3, rank 1.
    p = os.path.join(ep, "2", "3", "1.index")
    ops += [{"op": "stat", "path": p}, {"op": "read", "path": p}]
    return ops, names


def rel(mnt, path):
    return os.path.relpath(path, mnt)


def check_views(run, mnt, name, users):
    owner, group, mode, readers = EXPECT[name]
    ops, kinds = view_ops(mnt, name)
    root = run.run("root", ops)
    failed = [f"{o['op']} {rel(mnt, o['path'])}: {describe(r)}" for o, r in zip(ops, root) if r["errno"] != 0]
    prop(not failed, f"{name}: root reads every view ({len(ops)} operations on epochs/, epochs/0/1/{{{','.join(kinds)}}}, "
                     f"entries, xattrs, epochs/2/3/1.index)",
         f"{name}: root cannot read views: " + "; ".join(failed[:6]))
    # Owner, group and mode of everything under epochs/.
    dmode = mode | ((mode & 0o444) >> 2)
    wrong = []
    for o, r in zip(ops, root):
        if o["op"] != "stat" or r["errno"]:
            continue
        want = dmode if stat.S_ISDIR(r["mode"]) else mode
        if (r["uid"], r["gid"], stat.S_IMODE(r["mode"])) != (owner, group, want):
            wrong.append(f"{rel(mnt, o['path'])}: {r['uid']}:{r['gid']} {stat.S_IMODE(r['mode']):04o}")
    for sub in ("0", os.path.join("0", "1")):
        p = os.path.join(mnt, name, "epochs", sub)
        try:
            st = os.stat(p)
            if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (owner, group, dmode):
                wrong.append(f"{rel(mnt, p)}: {st.st_uid}:{st.st_gid} {stat.S_IMODE(st.st_mode):04o}")
        except OSError as e:
            wrong.append(f"{rel(mnt, p)}: {errname(e.errno)}")
    prop(not wrong, f"{name}: views are {owner}:{group}, files {mode:04o}, directories {dmode:04o}",
         f"{name}: views want {owner}:{group} files {mode:04o} dirs {dmode:04o}, got " + "; ".join(wrong[:4]) +
         (f" (+{len(wrong) - 4} more)" if len(wrong) > 4 else ""))
    for user in users:
        got = run.run(user, ops)
        if user in readers:
            diff = [f"{o['op']} {rel(mnt, o['path'])}: root {describe(a)}, {user} {describe(b)}"
                    for o, a, b in zip(ops, root, got) if not same_outcome(a, b, True)]
            prop(not diff, f"{name}: {user} reads every view as root does ({len(ops)} operations: bytes, names, "
                           f"attributes, xattrs)",
                 f"{name}: {user} should read the views as root: " + "; ".join(diff[:5]) +
                 (f" (+{len(diff) - 5} more)" if len(diff) > 5 else ""))
        else:
            diff = [f"{o['op']} {rel(mnt, o['path'])}: {describe(b)}"
                    for o, b in zip(ops, got) if b.get("errno") != errno.EACCES]
            prop(not diff, f"{name}: {user} gets EACCES from all {len(ops)} view operations "
                           f"(ls epochs/, stat/open/getfattr of epochs/0/1/{{{','.join(kinds)}}}, entries)",
                 f"{name}: {user} should get EACCES from the views, got: " + "; ".join(diff[:5]) +
                 (f" (+{len(diff) - 5} more)" if len(diff) > 5 else ""))


def names_under(backend):
    dirs, files = backend_entries(backend)
    return sorted({os.path.basename(p) for p in dirs + files if p})


def check_stats(run, mnt, work, datasets):
    p = os.path.join(mnt, ".dlfs", "stats")
    root = run.run("root", [{"op": "text", "path": p}])[0]
    closed = os.path.join(work, "closed")
    prop(root["errno"] == 0 and closed in root.get("text", ""), f"stats: as root, .dlfs/stats names {closed}",
         f"stats: as root, .dlfs/stats should name {closed}: {describe(root)}")
    out = run.run("outsider", [{"op": "text", "path": p}])[0]
    if out["errno"]:
        bad(f"stats: the outsider cannot read .dlfs/stats: {describe(out)}")
        return
    text = out["text"]
    try:
        json.loads(text)
        ok("stats: the outsider reads .dlfs/stats, JSON")
    except ValueError as e:
        bad(f"stats: the outsider's .dlfs/stats is not JSON: {e}")
    secret = [n for n in names_under(closed)] + [n for n in names_under(os.path.join(work, "group"))
                                                 if "group" in datasets]
    found = [n for n in secret if n in text]
    prop(closed not in text and not found,
         f"stats: the outsider's .dlfs/stats names neither {closed} nor any of {len(secret)} file and directory "
         f"names of closed and group",
         f"stats: the outsider's .dlfs/stats names " + (f"{closed} " if closed in text else "") +
         (f"files {found[:5]}" if found else ""))


def check_main(args):
    from checklib import fail
    datasets = args.datasets.split(",")
    unknown = [d for d in datasets if d not in EXPECT]
    if unknown:
        fail(f"no expectations for datasets {unknown}")
    run = Runner(args.work)
    users = sorted(USERS)
    for user in users:
        uid, gid, groups = USERS[user]
        w = run.run(user, [{"op": "whoami"}])[0]
        if (w["uid"], w["euid"], w["gid"], w["egid"], w["groups"], int(w["cap_eff"], 16)) != (uid, uid, gid, gid, groups, 0):
            fail(f"the probe as {user} does not run as {uid}:{gid} groups {groups} without capabilities: {w}")
    ok(f"probes run as {', '.join(f'{u} {USERS[u][0]}:{USERS[u][1]} groups {USERS[u][2]}' for u in users)}, "
       f"no capabilities")
    for name in datasets:
        readable = check_raw(run, args.mnt, args.work, name, users)
        if name not in EXPLICIT_KEYS:
            derived = {u for u in users if readable[u]}
            prop(derived == EXPECT[name][3],
                 f"{name}: the users who read every backend file ({sorted(derived) or 'none'}) are those the "
                 f"views are for",
                 f"{name}: harness: the users who read every backend file are {sorted(derived)}, the table says "
                 f"{sorted(EXPECT[name][3])}")
        check_views(run, args.mnt, name, users)
    if "closed" in datasets:
        check_stats(run, args.mnt, args.work, datasets)


def status_main(args):
    try:
        s = json.load(sys.stdin)
    except ValueError as e:
        bad(f"status: dlfs-ctl status --json printed no JSON: {e}")
        return
    by_name = {d.get("name"): d for d in s.get("datasets", [])}
    for name in args.datasets.split(","):
        owner, group, mode, readers = EXPECT[name]
        d = by_name.get(name)
        if d is None:
            bad(f"status: no dataset {name}")
            continue
        a = d.get("access")
        if not isinstance(a, dict):
            bad(f"status: {name} has no \"access\" object")
            continue
        want = {"owner": owner, "group": group, "mode": f"{mode:04o}"}
        got = {k: a.get(k) for k in want}
        types = (isinstance(a.get("owner"), int) and isinstance(a.get("group"), int) and
                 isinstance(a.get("mode"), str) and isinstance(a.get("readers"), str) and a.get("readers") and
                 isinstance(a.get("why"), str) and a.get("why"))
        prop(got == want and types,
             f"status: {name}: access owner {owner}, group {group}, mode {want['mode']}; "
             f"readers: {a.get('readers')!r}; why: {a.get('why')!r}",
             f"status: {name}: access {a}, want {want} with readers and why as text")


def crc32c(data, _table=[]):
    if not _table:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
            _table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = _table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def make_tfrecord(d, files, records, seed):
    assert crc32c(b"123456789") == 0xE3069283
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    for f in range(files):
        with open(os.path.join(d, f"train-{f:05d}-of-{files:05d}"), "wb") as out:
            for _ in range(records):
                data = rng.randbytes(rng.randrange(1, 700))
                n = struct.pack("<Q", len(data))
                out.write(n + struct.pack("<I", masked(n)) + data + struct.pack("<I", masked(data)))


def make_shards(d, shards, keys, seed):
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    for s in range(shards):
        with tarfile.open(os.path.join(d, f"shard-{s:04d}.tar"), "w", format=tarfile.GNU_FORMAT) as tar:
            for k in range(keys):
                for ext, data in (("jpg", rng.randbytes(rng.randrange(100, 900))), ("cls", b"%d" % rng.randrange(10))):
                    info = tarfile.TarInfo(f"s{s}/sample{k:04d}.{ext}")
                    info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
                    tar.addfile(info, io.BytesIO(data))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "probe":
        probe_main()
        return
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("make-tfrecord")
    t.add_argument("dir")
    t.add_argument("files", type=int)
    t.add_argument("records", type=int)
    t.add_argument("seed", type=int)
    w = sub.add_parser("make-shards")
    w.add_argument("dir")
    w.add_argument("shards", type=int)
    w.add_argument("keys", type=int)
    w.add_argument("seed", type=int)
    c = sub.add_parser("check")
    c.add_argument("--mnt", required=True)
    c.add_argument("--work", required=True)
    c.add_argument("--datasets", required=True)
    s = sub.add_parser("status")
    s.add_argument("--datasets", required=True)
    sub.add_parser("probe")
    args = ap.parse_args()
    if args.cmd == "make-tfrecord":
        make_tfrecord(args.dir, args.files, args.records, args.seed)
    elif args.cmd == "make-shards":
        make_shards(args.dir, args.shards, args.keys, args.seed)
    elif args.cmd == "check":
        check_main(args)
    elif args.cmd == "status":
        status_main(args)
    if FAILED:
        print(f"{len(FAILED)} properties failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
