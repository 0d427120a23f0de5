"""Who reads what: the rank (the view file) and, within a rank's view, the
DataLoader worker (blocks of whole samples, dealt round-robin)."""
import bisect
import os
import sys

DEFAULT_BLOCK_BYTES = 4 << 20


def resolve_rank(rank=None, world_size=None):
    """(rank, world_size): the arguments if given, else torch.distributed's
    if it is initialised, else the RANK and WORLD_SIZE environment variables
    (torchrun sets them), else (0, 1)."""
    if rank is not None or world_size is not None:
        if rank is None or world_size is None:
            raise ValueError("give both rank and world_size, or neither")
        return _checked(int(rank), int(world_size), "the arguments")
    dist = sys.modules.get("torch.distributed")  # never imports torch itself
    if dist is not None and dist.is_available() and dist.is_initialized():
        return _checked(dist.get_rank(), dist.get_world_size(), "torch.distributed")
    if "RANK" in os.environ or "WORLD_SIZE" in os.environ:
        try:
            return _checked(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "RANK/WORLD_SIZE")
        except (KeyError, ValueError):
            raise ValueError("RANK and WORLD_SIZE must both be set to integers "
                             f"(RANK={os.environ.get('RANK')!r}, WORLD_SIZE={os.environ.get('WORLD_SIZE')!r})") from None
    return 0, 1


def _checked(rank, world_size, source):
    if not (1 <= world_size <= 65535 and 0 <= rank < world_size):
        raise ValueError(f"rank {rank} of world size {world_size} (from {source}) is not a valid rank")
    return rank, world_size


def plan_blocks(group_begin, start, block_samples=None, block_bytes=DEFAULT_BLOCK_BYTES):
    """Cuts samples [start, G) into blocks [first, end) of whole samples.

    group_begin[g] is the byte where sample g starts (G + 1 entries; the last
    is where the last sample ends). A block holds `block_samples` samples if
    given, else the fewest samples reaching `block_bytes` (at least one)."""
    count = len(group_begin) - 1
    if not 0 <= start <= count:
        raise ValueError(f"start {start} is not in [0, {count}] (the samples of this view)")
    blocks, g = [], start
    while g < count:
        if block_samples:
            end = min(count, g + block_samples)
        else:
            end = bisect.bisect_left(group_begin, group_begin[g] + block_bytes, g + 1, count)
            end = max(end, g + 1)
        blocks.append((g, end))
        g = end
    return blocks


def worker_blocks(blocks, worker, num_workers):
    """Worker k of K takes blocks k, k+K, k+2K...: all workers stay within K
    blocks of each other (the daemon's read-ahead and round buffers follow one
    region of the epoch), each block is one large read, and every sample is
    in exactly one worker's share."""
    if not 0 <= worker < num_workers:
        raise ValueError(f"worker {worker} is not in [0, {num_workers})")
    return blocks[worker::num_workers]
