"""Where a view lives when it is another job's seed or the rest of an epoch
resumed on another world size (docs/views.md):

  <dataset>/seeds/<seed>/epochs/...                                   seed=
  <dataset>/epochs/<e>/<W>/resume/<consumed>/<W'>/<r'>.<fmt>          resume_from=(W, consumed)

`resume_from` is what a checkpoint of the first run holds: its world size W
and how many samples each of its ranks had read (one count if every rank
read the same, as DDP's lockstep ranks do, or W counts)."""
import os

MAX_WORLD = 65535
MAX_SEED = 2**64 - 1


def check_seed(seed):
    """seed as an int in [0, 2^64): ValueError naming it otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer in [0, 2^64), got {seed!r}")
    return seed


def resume_spec(resume_from):
    """(W, [c_0, ..., c_{W-1}]) from (W, counts) or {"world_size": W,
    "consumed": counts}, counts an int (every rank) or W ints; ValueError
    naming what is wrong."""
    if isinstance(resume_from, dict):
        unknown = set(resume_from) - {"world_size", "consumed"}
        if unknown or len(resume_from) != 2:
            raise ValueError(f"resume_from must be {{'world_size': W, 'consumed': counts}}, got {resume_from!r}")
        world, consumed = resume_from["world_size"], resume_from["consumed"]
    else:
        try:
            world, consumed = resume_from
        except (TypeError, ValueError):
            raise ValueError(f"resume_from must be (world_size, consumed counts) of the run that read part of the "
                             f"epoch, got {resume_from!r}") from None
    if isinstance(world, bool) or not isinstance(world, int) or not 1 <= world <= MAX_WORLD:
        raise ValueError(f"resume_from: world size must be an integer in [1, {MAX_WORLD}], got {world!r}")
    counts = [consumed] if isinstance(consumed, int) and not isinstance(consumed, bool) else list(consumed) \
        if isinstance(consumed, (list, tuple)) else None
    if counts is None or len(counts) not in (1, world):
        raise ValueError(f"resume_from: consumed must be one count (every rank) or {world} counts (one per rank of "
                         f"world size {world}), got {consumed!r}")
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise ValueError(f"resume_from: consumed counts must be non-negative integers, got {c!r} in {consumed!r}")
    return world, counts * world if len(counts) == 1 else counts


def consumed_name(counts):
    """The path component naming the counts: one count when they are all
    equal, else runs of equal counts as "c*k" (k > 1) or "c", comma-separated."""
    if counts and all(c == counts[0] for c in counts):
        return str(counts[0])
    parts, i = [], 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        parts.append(f"{counts[i]}*{j - i}" if j - i > 1 else str(counts[i]))
        i = j
    return ",".join(parts)


def epochs_dir(dataset_dir, seed=None):
    """`<dataset>/epochs`, or `<dataset>/seeds/<seed>/epochs`."""
    if seed is None:
        return os.path.join(dataset_dir, "epochs")
    return os.path.join(dataset_dir, "seeds", str(check_seed(seed)), "epochs")


def world_dir(dataset_dir, epoch, world_size, seed=None, resume_from=None):
    """The directory of the views of `world_size` ranks in `epoch`."""
    base = epochs_dir(dataset_dir, seed)
    if resume_from is None:
        return os.path.join(base, str(epoch), str(world_size))
    old_world, counts = resume_spec(resume_from)
    return os.path.join(base, str(epoch), str(old_world), "resume", consumed_name(counts), str(world_size))


def explain_missing(dataset_dir, epoch, seed, resume_from, path):
    """Why the resume view `path` does not exist: dlfsd refuses counts above
    a rank's view (its log names the path and the reason); the first run's
    view sizes say which. An OSError-derived FileNotFoundError."""
    old_world, counts = resume_spec(resume_from)
    first = os.path.join(epochs_dir(dataset_dir, seed), str(epoch), str(old_world))
    why = "dlfsd refused it (its log says why)"
    try:
        held = int(os.getxattr(os.path.join(first, "0.index"), "user.dlfs.samples"))
        over = [(r, c) for r, c in enumerate(counts) if c > held]
        if over:
            r, c = over[0]
            why = (f"rank {r} of {old_world} consumed {c} samples, but the views of {first} hold {held} each "
                   f"(a checkpoint of another epoch, world size or dataset?)")
    except (OSError, ValueError):
        pass
    return FileNotFoundError(2, f"no resume view {path}: {why}", path)
