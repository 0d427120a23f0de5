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
    """Indices i of `names` where a new sample begins (same rule as group_members)."""
    starts, key, exts = [], None, set()
    for i, name in enumerate(names):
        k, ext = split_key(name)
        if k != key or ext in exts:
            starts.append(i)
            key, exts = k, set()
        exts.add(ext)
    return starts
