"""Epoch views on a plain directory, laid out as dlfsd lays them out
(docs/views.md), written with Python's tarfile: the client's tests need no
mount. make_view writes <root>/epochs/<e>/<W>/<r>.tar and .index."""
import io
import os
import tarfile


def write_tar(path, members, fmt=tarfile.GNU_FORMAT):
    """members: [(name, bytes)]; returns [(name, data offset, size)] in order."""
    with tarfile.open(path, "w", format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    with tarfile.open(path) as t:
        return [(m.name, m.offset_data, m.size) for m in t]


def make_view(root, epoch, world_size, rank, members, ids=None, order="ordered"):
    """One rank's .tar and .index; ids default to the positions."""
    stem = os.path.join(root, "epochs", str(epoch), str(world_size), str(rank))
    os.makedirs(os.path.dirname(stem), exist_ok=True)
    layout = write_tar(stem + ".tar", members)
    ids = ids if ids is not None else list(range(len(members)))
    with open(stem + ".index", "w") as f:
        f.write(f"# dlfs view dataset=t epoch={epoch} world_size={world_size} rank={rank} samples={len(members)} "
                f"seed=1 remainder=pad order={order} rounds=1 rl=1.0000\n")
        for k, ((name, off, size), sid) in enumerate(zip(layout, ids)):
            f.write(f"{k}\t{sid}\t{off}\t{size}\t{name}\n")
    return stem


def _escape(name):
    return name.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def make_grouped_view(root, epoch, world_size, rank, groups):
    """A view of a dataset with group_by (docs/views.md): groups is
    [(key, [(name, bytes)])]; one .index line per group with the tar span of
    its members (first header to last padding) and the key, names escaped."""
    stem = os.path.join(root, "epochs", str(epoch), str(world_size), str(rank))
    os.makedirs(os.path.dirname(stem), exist_ok=True)
    members = [m for _, ms in groups for m in ms]
    write_tar(stem + ".tar", members)
    with tarfile.open(stem + ".tar") as t:
        starts = [m.offset for m in t]  # header offsets (a GNU long name's 'L' record comes first)
        ends = [m.offset_data + ((m.size + 511) & ~511) for m in t]
    with open(stem + ".index", "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(f"# dlfs view dataset=t epoch={epoch} world_size={world_size} rank={rank} samples={len(groups)} "
                f"seed=1 remainder=pad order=ordered rounds=1 rl=1.0000 group_by=first-dot\n")
        at = 0
        for k, (key, ms) in enumerate(groups):
            first, last = at, at + len(ms) - 1
            f.write(f"{k}\t{k}\t{starts[first]}\t{ends[last] - starts[first]}\t{_escape(key)}\n")
            at += len(ms)
    return stem


def sample_members(count, seed, groups=False, size=700):
    """Deterministic members; with groups, every other sample has two files
    (.jpg and .cls) and some names are longer than ustar allows."""
    out = []
    for i in range(count):
        d = "class_%02d/" % (i % 5) + ("x" * 120 + "/" if i % 7 == 3 else "")
        key = f"{d}s{seed}_{i:05d}"
        body = bytes((i * 31 + j + seed) % 251 for j in range(size + i % 13))
        out.append((key + ".jpg", body))
        if groups and i % 2:
            out.append((key + ".cls", str(i).encode()))
    return out
