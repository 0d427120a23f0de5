"""NVIDIA DALI's readers as loaders_bench.py's peers, on the CPU (no GPU:
device_id=None), as its users run them: one pipeline of --batch samples with
--workers threads (its "workers") and its own prefetching (queue depth 2),
random_shuffle=True (DALI's shuffle: a buffer of initial_fill = 1024 samples
read in storage order, batches drawn from it at random), pad_last_batch=True
so an epoch ends at a batch boundary and the padding is left out here.

  dali-file      fn.readers.file over the backend's files, file_list "<path> <id>"
                 in storage order (the id is the label)
  dali-tfrecord  fn.readers.tfrecord over TFRecord shards and their .idx files,
                 features data (bytes) and id (int64)

Each batch is copied out of DALI into torch tensors (the data as one uint8
tensor, as the DataLoader peers deliver theirs), the ids beside them; DALI's
PyTorch iterator is not used: it needs torch >= 2 (torch.device as a context
manager), and Debian's torch is 1.13. The pipeline is built inside epoch 1."""
import numpy
import torch


class Dali:
    def __init__(self, spec):
        self.spec, self.pipe, self.size = spec, None, None

    def _readers(self):
        from nvidia.dali import fn
        s = self.spec
        if s["variant"] == "dali-file":
            data, ids = fn.readers.file(file_root=s["files_root"], file_list=s["file_list"], random_shuffle=True,
                                        pad_last_batch=True, name="Reader")
            return data, ids
        import nvidia.dali.tfrecord as tfrec
        out = fn.readers.tfrecord(path=s["tfrecords"], index_path=[p + ".idx" for p in s["tfrecords"]],
                                  features={"data": tfrec.FixedLenFeature((), tfrec.string, ""),
                                            "id": tfrec.FixedLenFeature([1], tfrec.int64, -1)},
                                  random_shuffle=True, pad_last_batch=True, name="Reader")
        return out["data"], out["id"]

    def _build(self):
        from nvidia.dali import pipeline_def

        @pipeline_def(batch_size=self.spec["batch"], num_threads=self.spec["workers"], device_id=None)
        def pipeline():
            return self._readers()

        self.pipe = pipeline()
        self.pipe.build()
        self.size = self.pipe.reader_meta("Reader")["epoch_size"]

    def epoch(self, _e):
        if self.pipe is None:
            self._build()
        got = 0
        while got < self.size:
            data, ids = self.pipe.run()
            k = min(len(ids), self.size - got)
            torch.from_numpy(data.as_array())  # the batch as the training loop would take it
            got += k
            yield numpy.array(ids.as_array(), dtype=numpy.int64).reshape(-1)[:k]  # a copy: DALI reuses its buffers


PEERS = {"dali-file": Dali, "dali-tfrecord": Dali}
