"""YOCO: the metadata a step's layers share, built once per sharing group and reused.

Within one step (model roles in config.py):
  * the SWA metadata (decode SWA lists, the prefill gather lengths, int32 positions) is the same
    for every layer: built once per step;
  * the compressed metadata of a kv source (seq_lens // ratio) is the same for every layer that
    reads its cache, and so is the compressed gather into the prefill slab (rows [0, N)) while
    the step has one prefill chunk and nothing else writes those rows;
  * the translated decode top-k lists and the combined prefill index matrix depend on the
    (kv source, index source) pair: built by the index source, reused by the rest of its group.
A StepState is made per step (like vLLM's per-forward context) and counts what it built.
"""
from collections import Counter


class StepState:
    """Build bookkeeping of one step. reuse=False rebuilds at every layer (the baseline the
    benchmark compares against). `builds` counts builds by kind: 'swa', 'kv', 'kv_gather',
    'index'."""

    def __init__(self, meta, reuse=True):
        self.meta, self.reuse = meta, reuse
        self.builds = Counter()
        self._built = set()
        self.slab_tag = None       # (kv source, chunk) whose compressed rows the slab holds

    def need(self, kind, key):
        """True (and counted) when (kind, key) must be built at this layer."""
        if self.reuse and (kind, key) in self._built:
            return False
        self._built.add((kind, key))
        self.builds[kind] += 1
        return True

    def need_gather(self, kv_source, chunk):
        """Whether the compressed rows of `chunk` must be gathered into the slab again."""
        tag = (kv_source, chunk)
        if self.reuse and len(self.meta.prefill_chunks) == 1 and self.slab_tag == tag:
            return False
        self.slab_tag = tag
        self.builds["kv_gather"] += 1
        return True

    def slab_overwritten(self):
        """A layer without a compressed cache wrote slab rows from 0: drop the tag."""
        self.slab_tag = None
