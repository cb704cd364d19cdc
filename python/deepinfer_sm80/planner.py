"""Workspace planning for the torch custom ops (deepinfer_sm80.ops): sizes from the library, one
buffer per device, allocated once.

Six operators need scratch memory on the GPU: topk_translate_packed, sparse_mla_decode (split-KV
partials), mhc_gates, mhc_pre and mhc_seam (the split projection), and indexer_topk (split results). A `Planner` is told the shapes a
serving step will run (every batch size a CUDA graph is captured for, for example), asks the
library how many bytes each needs (dsv4_<op>_workspace_size, dsv4_sparse_mla_decode_plan,
dsv4_mhc_plan) and keeps the largest. `workspace(device)` then returns one uint8 tensor of that
size per device, the same tensor on every call, which the custom ops take as their `workspace`
argument: nothing is allocated inside an op call, so a CUDA-graph capture sees fixed addresses.
The ops of one step run one after another on one stream, so they share the buffer; calls on
concurrent streams need a planner each.

Needs torch. Plans are host computations and run without a GPU (pass sm_count or num_splits for
sparse_mla_decode there: its split count otherwise comes from the current device).
"""
import torch

from . import _structs as S
from ._ops import op, struct
from .attention import _plan
from .mhc import ROUTE_AUTO, mhc_plan

RECORD = S.DSV4_KV_RECORD_BYTES


def _each(n):
    """A token count or a sequence of them (the batch sizes a step is captured for)."""
    return [int(n)] if isinstance(n, int) else [int(t) for t in n]


def _list_desc(width, page_tokens):
    """The descriptor of one sparse MLA list over a one-page cache, its page rounded up to the
    16 bytes the library requires (the plan depends on neither page count nor stride), over
    dense id rows."""
    page = (page_tokens * RECORD + 15) // 16 * 16
    cache = struct("dsv4_sparse_mla_cache_t", page_tokens=page_tokens, page_stride_bytes=page, num_pages=1)
    return struct("dsv4_sparse_mla_list_t", width=width, stride=width, cache=cache)


class Planner:
    """The workspace of the custom ops for a set of planned calls.

    Plan methods take the shapes of a call (num_tokens may be a sequence: each is planned),
    return the largest byte count of that op so far and raise the library's error for shapes
    it rejects. `sizes` maps an op name to its largest planned size; `workspace_bytes` is the
    largest over all ops; `workspace(device)` is the shared uint8 [workspace_bytes] tensor.
    Planning a larger size after a buffer was handed out raises RuntimeError (captured graphs
    hold the old address): plan every shape first.
    """

    def __init__(self):
        self.sizes = {}
        self._buffers = {}

    def _add(self, name, nbytes):
        if self._buffers and nbytes > self.workspace_bytes:
            raise RuntimeError(f"Planner: {name} needs {nbytes} bytes, more than the {self.workspace_bytes} of the "
                               "workspace already handed out; plan every shape before calling workspace()")
        self.sizes[name] = max(self.sizes.get(name, 0), int(nbytes))
        return self.sizes[name]

    @property
    def workspace_bytes(self):
        """The largest planned size in bytes (0 when nothing planned needs scratch memory)."""
        return max(self.sizes.values(), default=0)

    def workspace(self, device="cuda"):
        """uint8 [workspace_bytes] on `device`, allocated on the first call and returned as the
        same tensor afterwards ('cuda' means the current CUDA device)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        buf = self._buffers.get(device)
        if buf is None:
            buf = self._buffers[device] = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device)
        return buf

    def topk_translate_packed(self, num_tokens, topk, *, num_reqs, block_table_width, page_tokens):
        """topk_indices int32 [T, topk], block_table int32 [num_reqs, block_table_width]."""
        o = op("topk_translate_packed")
        for T in _each(num_tokens):
            # The strides of dense tensors (the library has no default stride).
            desc = struct("dsv4_topk_translate_desc_t", num_tokens=T, topk=topk, num_reqs=num_reqs,
                          block_table_width=block_table_width, page_tokens=page_tokens, topk_stride=topk,
                          block_table_stride=block_table_width)
            self._add("topk_translate_packed", o.workspace_size(desc))
        return self.sizes["topk_translate_packed"]

    def sparse_mla_decode(self, num_tokens, num_heads, *, main_width, main_page_tokens, extra_width=0,
                          extra_page_tokens=None, num_splits=0, force_merge=False, config=0, sm_count=0):
        """q bf16 [T, num_heads, 512]; main_ids int32 [T, main_width]; extra_ids int32 [T,
        extra_width] when extra_width > 0. num_splits, force_merge, config and sm_count as the
        op will be called with them (0 = auto; sm_count 0 = the current device's)."""
        for T in _each(num_tokens):
            # The plan of dense q, out and ids (the library has no default stride).
            desc = struct("dsv4_sparse_mla_decode_desc_t", num_tokens=T, num_heads=num_heads,
                          q_stride_token=num_heads * 512, q_stride_head=512, out_stride_token=num_heads * 512,
                          out_stride_head=512,
                          main=_list_desc(main_width, main_page_tokens), has_extra=int(bool(extra_width)),
                          extra=_list_desc(extra_width, extra_page_tokens) if extra_width else struct(
                              "dsv4_sparse_mla_list_t"), num_splits=num_splits, force_merge=int(force_merge),
                          config=config, sm_count=sm_count)
            plan = _plan("sparse_mla_decode", desc)
            self._add("sparse_mla_decode", plan["workspace_bytes"])
        return self.sizes["sparse_mla_decode"]

    def indexer_topk(self, num_rows, num_heads, topk, *, ratio, max_keys, page_tokens, num_reqs=1,
                     block_table_width=None, candidate_mode=0, candidate_count=2048, num_splits=0):
        """q8 uint8 [T, num_heads, 128] for T in num_rows; topk int32 [T, topk]; max_keys, ratio,
        page_tokens, candidate_mode and num_splits as the op will be called with them (the
        workspace holds each row's split results, plus block scores in mode 1 or sorted
        candidate lists in mode 2)."""
        o = op("indexer_topk")
        width = block_table_width or -(-max_keys // page_tokens)
        for T in _each(num_rows):
            desc = struct("dsv4_indexer_topk_desc_t", num_rows=T, num_heads=num_heads, topk=topk, ratio=ratio,
                          num_reqs=num_reqs, block_table_width=width, block_table_stride=width,
                          page_tokens=page_tokens, page_stride_bytes=page_tokens * S.DSV4_INDEXER_STATE_BYTES,
                          num_pages=1, topk_stride=topk, max_keys=max_keys, candidate_mode=candidate_mode,
                          candidate_count=candidate_count, candidate_block=8, candidate_stride=candidate_count,
                          num_splits=num_splits)
            self._add("indexer_topk", o.workspace_size(desc))
        return self.sizes["indexer_topk"]

    def _mhc(self, name, num_tokens, hidden, broadcast, route):
        for T in _each(num_tokens):
            self._add(name, mhc_plan(T, hidden, broadcast, route)["workspace_bytes"])
        return self.sizes[name]

    def mhc_gates(self, num_tokens, hidden, *, broadcast=False, route=ROUTE_AUTO):
        """residual bf16 [T, 4, hidden] (or the embedding [T, hidden] with broadcast=True)."""
        return self._mhc("mhc_gates", num_tokens, hidden, broadcast, route)

    def mhc_pre(self, num_tokens, hidden, *, broadcast=False, route=ROUTE_AUTO):
        """As mhc_gates."""
        return self._mhc("mhc_pre", num_tokens, hidden, broadcast, route)

    def mhc_seam(self, num_tokens, hidden, *, route=ROUTE_AUTO):
        """residual bf16 [T, 4, hidden]."""
        return self._mhc("mhc_seam", num_tokens, hidden, False, route)
