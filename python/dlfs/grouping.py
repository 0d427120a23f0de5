"""Sample groups, WebDataset's convention: the files of one sample share a
key, the member path up to the first dot of its base name, and differ in
extension (the rest): `n01/img_17.jpg` and `n01/img_17.cls` form the sample
`n01/img_17` as {"jpg": ..., "cls": ...}. Grouping works on adjacency: the
members of one sample follow each other in the stream."""


def split_key(name):
    """(key, extension) of a member path; extension is "" without a dot."""
    base = name.rfind("/") + 1
    dot = name.find(".", base)
    if dot < 0:
        return name, ""
    return name[:dot], name[dot + 1:]


def group_members(members):
    """(key, {ext: data}) for runs of consecutive (name, data) with one key.
    A repeated extension starts a new sample: the same file served twice in a
    row (a padded epoch of a tiny dataset) is two samples, not one."""
    key, group = None, {}
    for name, data in members:
        k, ext = split_key(name)
        if k != key or ext in group:
            if group:
                yield key, group
            key, group = k, {}
        group[ext] = data
    if group:
        yield key, group


def group_starts(names):
    """Indices i of `names` where a new sample begins (same rule as group_members).
    Keys first, in one pass; extensions only where a key repeats (rare)."""
    keys = [n[:d] if (d := n.find(".", n.rfind("/") + 1)) >= 0 else n for n in names]
    starts, exts = [], set()
    for i in range(len(keys)):
        if i and keys[i] == keys[i - 1]:
            ext = split_key(names[i])[1]
            if ext not in exts:
                exts.add(ext)
                continue
        starts.append(i)
        exts = {split_key(names[i])[1]} if i + 1 < len(keys) and keys[i + 1] == keys[i] else set()
    return starts
