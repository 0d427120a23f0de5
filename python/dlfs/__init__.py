"""DLFS's Python client: read DLFS epoch views (docs/views.md) with large
reads, as sample groups (key, {ext: bytes}) or as whole batches (ViewBatch).

Without torch: TarView, ViewBatch, BinView, iter_members, group_members, read_file;
through dlfsd's client socket: SampleBatches, SampleBatch, Client, find_socket.
With torch (imported on first use): TarViewDataset, BinViewDataset, SampleBatchDataset.
See docs/python.md."""
from .batches import ViewBatch
from .client import Client, ClientError, ClientUnavailable, ClientView, find_socket
from .files import read_file
from .grouping import group_members, split_key
from .index import ViewIndex, ViewIndexError, view_path
from .samplebatches import SampleBatch, SampleBatches
from .split import resolve_rank
from .tarstream import TarFormatError, iter_members
from .view import BinView, TarView

__all__ = ["BinView", "BinViewDataset", "Client", "ClientError", "ClientUnavailable", "ClientView", "SampleBatch",
           "SampleBatchDataset", "SampleBatches", "TarFormatError", "TarView", "TarViewDataset", "ViewIndex",
           "ViewBatch", "ViewIndexError", "find_socket", "group_members", "iter_members", "read_file", "resolve_rank",
           "split_key", "view_path"]
__version__ = "0.1.0"  # the project's (meson.build); tests/python/test_package.py holds them equal


def __getattr__(name):  # torch is imported only when a torch dataset is asked for
    if name in ("TarViewDataset", "BinViewDataset", "SampleBatchDataset"):
        from . import datasets
        return getattr(datasets, name)
    raise AttributeError(f"module 'dlfs' has no attribute '{name}'")
