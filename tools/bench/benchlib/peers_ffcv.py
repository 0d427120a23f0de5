"""FFCV as loaders_bench.py's peer, run by the Python that has ffcv
(--ffcv-python: a venv of its own, built against Debian's OpenCV and
libjpeg-turbo; tools/bench/README.md says how): one Loader over the
.beton (benchlib/formats.py), order=OrderOption.RANDOM (a uniform permutation
per epoch), --workers threads, --batch, drop_last=False, the page cache as
its cache (os_cache, FFCV's default). Its pipelines are compiled with numba
on the first batch: inside epoch 1's time, as users see it."""
import numpy


class Ffcv:
    def __init__(self, spec):
        self.spec, self.loader = spec, None

    def epoch(self, _e):
        if self.loader is None:
            from ffcv.loader import Loader, OrderOption
            s = self.spec
            self.loader = Loader(s["ffcv_file"], batch_size=s["batch"], num_workers=s["workers"],
                                 order=OrderOption.RANDOM, drop_last=False)
        for _data, ids in self.loader:
            yield numpy.array(ids, dtype=numpy.int64).reshape(-1)  # a copy: FFCV reuses its batch buffers


PEERS = {"ffcv": Ffcv}
