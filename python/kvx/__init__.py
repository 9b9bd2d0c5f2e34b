"""kvx: moves the KV cache of LLM requests from prefill to decode ranks.

The Python face of libkvx (include/kvx.h). A Context is one rank's place in
an MPI job of prefill and decode instances, its KV pool (numpy arrays, torch
tensors or raw addresses: kvx moves those bytes, never a copy) and its rooms
(one request's transfer each). Failures are KvxError exceptions carrying
kvx's whole failure record; str() of one is kvx's own one-line format.

The status, state and stage names come from libkvx's own tables at import;
nothing here copies a number from kvx.h.  docs/user/python.md has a guide.
"""

import collections
import ctypes
import dataclasses
import enum
import time

from . import _kvx

__all__ = [
    "Agreed",
    "Context",
    "KVLayout",
    "KvxError",
    "PoolSpec",
    "kv_interleaved",
    "layers_interleaved",
    "Origin",
    "RankShape",
    "Stage",
    "State",
    "Status",
    "rank_shape",
    "version",
    "versions",
]

_TABLES = _kvx.tables()

#: kvx_status_t: Status.OK, Status.ERR_TIMEOUT, ... (KVX_ prefix dropped).
Status = enum.IntEnum("Status", [(name[4:], value) for value, name, _ in _TABLES["statuses"]])
#: kvx_room_state_t, numbered so that the minimum over ranks is the agreed state.
State = enum.IntEnum("State", [(name, value) for value, name in _TABLES["states"]])
#: kvx_stage_t, in the order a room meets them.
Stage = enum.IntEnum("Stage", [(name.upper(), value) for value, name in _TABLES["stages"]])

_STATUS_MESSAGES = {value: msg for value, _, msg in _TABLES["statuses"]}
_STATUS_BY_VALUE = {int(s): s for s in Status}

#: Where a failure was recorded: world rank, role ("prefill"/"decode"),
#: instance and TP rank inside it (-1 where unknown).
Origin = collections.namedtuple("Origin", "rank role instance tp")


class KvxError(Exception):
    """A kvx failure: the whole record, as every rank of the room sees it.

    Attributes: room (None outside a room), status (Status), stage (a stage
    name, "post", ...), origin (Origin), foreign (the foreign library's
    text, or ""), sentence (what went wrong), injected (a KVX_FAULT rule
    made it), count (TP ranks that failed the room), record (the dict).
    str() is kvx_failure_format()'s line.
    """

    def __init__(self, record):
        super().__init__(record["line"])
        self.record = record
        self.room = record["room"]
        self.status = Status(record["status"])
        self.stage = record["stage"]
        self.origin = Origin(
            record["origin_rank"],
            record["origin_role"],
            record["origin_instance"],
            record["origin_tp"],
        )
        self.foreign = record["foreign"]
        self.sentence = record["text"]
        self.injected = record["injected"]
        self.count = record["count"]

    def __str__(self):
        return self.record["line"]

    def __reduce__(self):
        return (type(self), (self.record,))


_kvx._register(KvxError, tuple(State(v) for v in range(len(State))))


def version():
    """kvx's version, "0.1.0"."""
    return _kvx.version()


def versions():
    """kvx_versions(): kvx, MPI, UCX, hwloc and CUDA versions as a dict."""
    return _kvx.versions()


def _enum_value(table, value, what):
    if isinstance(value, int):
        return value
    try:
        return _TABLES[table][str(value).lower()]
    except KeyError:
        raise ValueError(
            "unknown %s %r (one of %s)" % (what, value, ", ".join(_TABLES[table]))
        ) from None


def _dtype_name(dtype):
    """'bf16', 'fp16', 'fp8', 'fp32' from a name, a torch or a numpy dtype."""
    if isinstance(dtype, (int, str)) and str(dtype).lower() in _TABLES["dtypes"]:
        return dtype
    text = str(dtype).lower().replace("torch.", "")
    aliases = {
        "bfloat16": "bf16",
        "float16": "fp16",
        "half": "fp16",
        "float32": "fp32",
        "float": "fp32",
        "float8_e4m3fn": "fp8",
        "float8_e5m2": "fp8",
        "uint8": "fp8",
        "int8": "fp8",
    }
    if text in aliases:
        return aliases[text]
    return dtype


@dataclasses.dataclass(frozen=True)
class KVLayout:
    """The model's KV geometry as the whole instance sees it (kvx_kv_layout_t).

    dtype: "bf16", "fp16", "fp8", "fp32" or a torch/numpy dtype; attn: "mha"
    (MHA and GQA: K and V) or "mla" (one latent); page_layout: "hnd", "nhd"
    or "head_major" (include/kvx.h says where each byte lives).
    """

    layers: int
    page_size: int
    kv_heads: int
    head_dim: int
    dtype: object = "bf16"
    attn: str = "mha"
    page_layout: str = "hnd"

    @property
    def components(self):
        """Buffers per layer: 2 (K, V) or 1 (MLA)."""
        return 1 if _enum_value("attn", self.attn, "attention kind") == _TABLES["attn"]["mla"] else 2

    def _args(self):
        return dict(
            layers=self.layers,
            page_size=self.page_size,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            dtype=_enum_value("dtypes", _dtype_name(self.dtype), "dtype"),
            attn=_enum_value("attn", self.attn, "attention kind"),
            page_layout=_enum_value("page_layouts", self.page_layout, "page layout"),
        )


#: What one rank holds: its first model KV head, how many, and the bytes of
#: one page of one (layer, component).
RankShape = collections.namedtuple("RankShape", "first_head heads page_bytes")


def rank_shape(kv, tp_size, tp_rank=0):
    """What a TP rank of an instance of TP tp_size will hold, before any
    context exists (kvx_kv_rank_shape), so that an engine can size its pool:
    RankShape(first_head, heads, page_bytes). Raises KvxError for a layout
    kvx would refuse."""
    return RankShape(*_kvx.rank_shape(tp_size=tp_size, tp_rank=tp_rank, **kv._args()))


class _Memory:
    """An object's address, length and device, from a torch tensor (CPU or
    CUDA: data_ptr()), anything with __cuda_array_interface__ or
    __array_interface__ (numpy), a writable buffer, or an int address."""

    def __init__(self, obj):
        self.obj = obj
        self.cuda_device = None
        self.shape = getattr(obj, "shape", None)
        if isinstance(obj, int):
            self.addr, self.nbytes = obj, None
        elif hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):
            if not obj.is_contiguous():
                raise ValueError("a KV pool tensor must be contiguous")
            self.addr = obj.data_ptr()
            self.nbytes = obj.numel() * obj.element_size()
            if obj.is_cuda:
                self.cuda_device = obj.device.index if obj.device.index is not None else 0
        elif hasattr(obj, "__cuda_array_interface__"):
            iface = obj.__cuda_array_interface__
            self.addr = iface["data"][0]
            self.nbytes = _nbytes(iface)
            self.cuda_device = 0
        elif hasattr(obj, "__array_interface__"):
            iface = obj.__array_interface__
            if iface.get("strides") is not None and not obj.flags["C_CONTIGUOUS"]:
                raise ValueError("a KV pool array must be C-contiguous")
            self.addr = iface["data"][0]
            self.nbytes = obj.nbytes
        else:
            view = memoryview(obj)
            if view.readonly or not view.c_contiguous:
                raise ValueError("a KV pool buffer must be writable and contiguous")
            self.nbytes = view.nbytes
            self.addr = ctypes.addressof((ctypes.c_char * view.nbytes).from_buffer(obj))


def _nbytes(iface):
    n = 1
    for d in iface["shape"]:
        n *= d
    return n * int(iface["typestr"][2:])


def _pages(pages):
    """Page ids as the C layer takes them: a list, or a uint32 buffer."""
    if isinstance(pages, (list, tuple, range)):
        return pages
    if hasattr(pages, "detach"):  # torch
        pages = pages.detach().cpu().numpy()
    if hasattr(pages, "astype"):  # numpy
        import numpy

        return numpy.ascontiguousarray(pages, dtype=numpy.uint32)
    return list(pages)


# kvx_verify_t (include/kvx.h)
_VERIFY = {None: 0, "off": 1, "sample": 2, "full": 3}


class PoolSpec:
    """A pool described by buffer addresses and a page stride
    (kvx_ctx_params_t.page_stride): pages of several buffers interleave in
    one tensor. Made by kv_interleaved() and layers_interleaved(); pass it
    as Context(pools=...)."""

    def __init__(self, buffers, page_stride, num_pages, keep):
        self.buffers, self.page_stride, self.num_pages = buffers, page_stride, num_pages
        self.keep = keep  # the tensors, kept alive by the context
        devices = {_Memory(t).cuda_device for t in keep}
        self.cuda_device = devices.pop() if len(devices) == 1 else None


def _page_nbytes(t, skip):
    n = t.element_size() if hasattr(t, "element_size") else t.itemsize
    for d in t.shape[skip:]:
        n *= d
    return n


def kv_interleaved(per_layer):
    """K and V interleaved in each block: one tensor per layer shaped
    [num_blocks, 2, <page>] (vLLM's FlashInfer layout is [num_blocks, 2,
    block_size, kv_heads, head_dim]: NHD pages). Every tensor contiguous and
    alike."""
    first = per_layer[0]
    if len(first.shape) < 3 or first.shape[1] != 2:
        raise ValueError("kv_interleaved takes [num_blocks, 2, ...] tensors, not %s" % (tuple(first.shape),))
    page = _page_nbytes(first, 2)
    buffers = []
    for t in per_layer:
        if tuple(t.shape) != tuple(first.shape):
            raise ValueError("kv_interleaved: every layer's tensor must have one shape")
        base = _Memory(t).addr
        buffers += [base, base + page]
    return PoolSpec(buffers, 2 * page, int(first.shape[0]), list(per_layer))


def layers_interleaved(tensor, components=2):
    """Every layer in one tensor, [num_blocks, layers, components, <page>]."""
    if len(tensor.shape) < 4 or tensor.shape[2] != components:
        raise ValueError("layers_interleaved takes [num_blocks, layers, %d, ...], not %s"
                         % (components, tuple(tensor.shape)))
    page = _page_nbytes(tensor, 3)
    layers = int(tensor.shape[1])
    base = _Memory(tensor).addr
    buffers = [base + (layer * components + c) * page for layer in range(layers) for c in range(components)]
    return PoolSpec(buffers, layers * components * page, int(tensor.shape[0]), [tensor])


#: The agreed view of one room after a round: status (Status.OK: agreed by
#: every TP rank; INPROGRESS: not every TP rank holds it yet; ERR_NO_ROOM)
#: and state (State).
Agreed = collections.namedtuple("Agreed", "status state")


class Round:
    """One round of agreement; test() never blocks, wait() releases the GIL."""

    def __init__(self, ctx, rooms):
        self._round = ctx.agree_start(rooms)
        self.result = None

    def _done(self, out):
        if out is None:
            return None
        status, rows = out
        by_value, make = _STATUS_BY_VALUE, Agreed._make
        self.status = by_value[status]
        self.result = {room: make((by_value[st], state)) for room, st, state in rows}
        return self.result

    def test(self):
        """None while in progress, else {room: Agreed}."""
        return self._done(self._round.test())

    def wait(self):
        """Blocks until the round is done; {room: Agreed}."""
        return self._done(self._round.wait())


Identity = collections.namedtuple(
    "Identity",
    "world_rank world_size role instance tp_rank tp_size "
    "prefill_instances prefill_tp decode_instances decode_tp",
)


class Context:
    """One rank's kvx context (kvx_ctx_create_f). Collective over comm.

    comm:      an mpi4py communicator (default MPI.COMM_WORLD) or a Fortran
               handle (int)
    layout:    "prefill:AxB,decode:CxD" (None: the KVX_LAYOUT variable)
    kv:        a KVLayout
    pools:     None (kvx allocates num_pages pages), one object holding every
               (layer, component) buffer back to back (a slab), a sequence of
               layers * components buffers ([layer * components + component],
               K=0, V=1), or a sequence of per-layer (K, V) pairs. Each is a
               torch tensor (CPU or CUDA), a numpy array, a writable buffer or
               an address (int). The objects are kept alive by the context.
    num_pages: pages per (layer, component); inferred from the tensors'
               shape when not given (HND/NHD: shape[0]; HEAD_MAJOR: shape[1])
    aux_slots, aux_item_size: the decode side's aux slots and their size
    fault:     KVX_FAULT rules for this context
    cuda_device: the pool's CUDA device (inferred from CUDA tensors)
    page_stride: bytes from one page to the next in each buffer (0: pages
               back to back); kv_interleaved() and layers_interleaved() set
               it with the buffers
    verify:    None (the KVX_VERIFY variable), "off", "sample" or "full":
               whether this rank checks the KV that lands in its pool against
               the writer's digests (docs/user/integrity.md)
    """

    def __init__(
        self,
        comm=None,
        layout=None,
        kv=None,
        pools=None,
        num_pages=None,
        aux_slots=0,
        aux_item_size=0,
        fault=None,
        cuda_device=None,
        page_stride=0,
        verify=None,
    ):
        if kv is None:
            raise ValueError("kv= (a kvx.KVLayout) is required")
        if verify not in _VERIFY:
            raise ValueError("verify= is None, 'off', 'sample' or 'full', not %r" % (verify,))
        self.kv = kv
        if isinstance(pools, PoolSpec):
            spec = pools
            pools, page_stride = spec.buffers, spec.page_stride
            num_pages = spec.num_pages if num_pages is None else num_pages
            if cuda_device is None:
                cuda_device = spec.cuda_device
            self._keep = spec.keep
        buffers, slab, mems = self._pool_args(kv, pools)
        if num_pages is None:
            num_pages = self._infer_pages(kv, mems)
        devices = {m.cuda_device for m in mems}
        if len(devices) > 1:
            raise ValueError("the KV pool mixes host and CUDA memory, or CUDA devices")
        device = devices.pop() if devices else None
        if cuda_device is None:
            cuda_device = device
        mem_type = _TABLES["mem_types"]["host" if cuda_device is None else "cuda"]
        self._pools = pools
        self._c = _kvx.Context(
            comm_f=_comm_f(comm),
            layout=layout,
            num_pages=num_pages,
            buffers=buffers,
            slab=slab,
            aux_slots=aux_slots,
            aux_item_size=aux_item_size,
            fault=fault,
            mem_type=mem_type,
            cuda_device=cuda_device or 0,
            page_stride=page_stride,
            verify=_VERIFY[verify],
            **kv._args()
        )
        self.num_pages = num_pages
        self.aux_item_size = aux_item_size
        self.identity = Identity(**self._c.identity())
        first, heads, page_bytes = self._c.geometry()
        self.first_head, self.heads, self.page_bytes = first, heads, page_bytes
        self._tp_comm = None
        # The calls an engine makes per request and per step go straight to C.
        c = self._c
        self.poll = c.poll
        self.send_open = c.send_open
        self.info = c.info
        self.abort = c.abort

    @staticmethod
    def _pool_args(kv, pools):
        if pools is None:
            return None, None, []
        if isinstance(pools, (list, tuple)):
            flat = []
            for item in pools:
                flat.extend(item if isinstance(item, (list, tuple)) else [item])
            want = kv.layers * kv.components
            if len(flat) != want:
                raise ValueError(
                    "pools has %d buffers; the layout needs %d (layers x components)"
                    % (len(flat), want)
                )
            mems = [_Memory(b) for b in flat]
            return [m.addr for m in mems], None, mems
        mem = _Memory(pools)
        return None, mem.addr, [mem]

    @staticmethod
    def _infer_pages(kv, mems):
        if not mems:
            raise ValueError("num_pages is required when kvx allocates the pool")
        shape = mems[0].shape
        if shape is None:
            raise ValueError("num_pages is required for pools given as addresses or buffers")
        head_major = _enum_value("page_layouts", kv.page_layout, "") == _TABLES["page_layouts"][
            "head_major"
        ]
        if len(mems) == 1 and len(shape) > 5:  # a slab [layers, comps, ...]
            shape = shape[2:]
        return int(shape[1] if head_major else shape[0])

    # ---- the context ---------------------------------------------------------

    @property
    def role(self):
        """"prefill" or "decode"."""
        return self.identity.role

    @property
    def tp_comm(self):
        """The instance's TP communicator, as an mpi4py communicator (owned by
        kvx: valid until close(); do not free it)."""
        if self._tp_comm is None:
            from mpi4py import MPI

            self._tp_comm = MPI.Comm.f2py(self._c.tp_comm_f())
        return self._tp_comm

    def kv_buffer(self, layer, component):
        """(address, length) of one (layer, component) buffer of the pool."""
        return self._c.kv_buffer(layer, component)

    def kv_array(self, layer, component):
        """One (layer, component) buffer of a host pool as a numpy uint8 array
        (a view of kvx's memory: valid until close())."""
        import numpy

        addr, length = self._c.kv_buffer(layer, component)
        return numpy.ctypeslib.as_array((ctypes.c_uint8 * length).from_address(addr))

    def mem_path(self):
        """(path, reason): "direct" or "staged", and why."""
        return self._c.mem_path()

    def pair_status(self, other_instance):
        """None when this rank can exchange pages with that instance of the
        other role, else the KvxError that says why: which values differ
        (KVX_ERR_KV_MISMATCH), or of an instance that joined the running job,
        that it is still joining (KVX_ERR_BUSY) or gone (KVX_ERR_PEER_LOST)."""
        record = self._c.pair_status(other_instance)
        return None if record is None else KvxError(record)

    def membership(self):
        """kvx_ctx_membership: a count that grows whenever an instance of the
        other role joins, is replaced, leaves or is lost (docs/user/join.md);
        poll it, and when it moved read identity and pair_status again."""
        return self._c.membership()

    def join_address(self):
        """kvx_ctx_join_address: "HOST:PORT" where this rank takes instances
        that join the running job (a joiner's KVX_JOIN), or None when it
        serves no door (no job key, a rank of the last role, a joiner)."""
        return self._c.join_address()

    def close(self):
        """kvx_ctx_destroy: collective over the live ranks of the job."""
        self._tp_comm = None
        self._c.destroy()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- rooms ---------------------------------------------------------------

    def recv_open(self, room, prefill_instance, pages, aux_slot=-1):
        """Decode side: receive room into pages (in token order) and aux_slot."""
        self._c.recv_open(room, prefill_instance, _pages(pages), aux_slot)

    def send_chunk(self, room, pages, aux=None):
        """Prefill side: hand over the next pages; the last chunk may carry aux."""
        self._c.send_chunk(room, _pages(pages), aux)

    def send_layers(self, room, pages, first_layer, nlayers=1, aux=None, event=None):
        """Prefill side, layer by layer: hand over the next pages of layers
        [first_layer, first_layer + nlayers) (each layer has its own cursor);
        the hand-over that completes every (page, layer) may carry aux.

        event: None when the pages are ready now; on a CUDA pool a
        torch.cuda.Event recorded after those layers' kernels (or its
        cudaEvent_t as an int): kvx posts them once it completed, without
        the caller waiting. Keep it, not recorded again, until the room is
        SUCCESS or FAILED here.
        """
        handle = 0
        if event is not None:
            handle = int(getattr(event, "cuda_event", event))
        self._c.send_layers(room, _pages(pages), first_layer, nlayers, aux, handle)

    def failure(self, room):
        """The room's root cause as a KvxError (not raised), or None."""
        record = self._c.failure(room)
        return None if record is None else KvxError(record)

    def raise_failure(self, room):
        """Raises the room's KvxError when it has failed."""
        record = self._c.failure(room)
        if record is not None:
            raise KvxError(record)

    def aux(self, room):
        """The aux payload of a SUCCESS decode room (bytes)."""
        return self._c.aux(room, max(self.aux_item_size, 1))

    def close_room(self, room):
        """kvx_room_close: Status.OK (pages free), ERR_BUSY (a writer has not
        confirmed yet: call again) or ERR_QUARANTINED (never reuse them)."""
        return Status(self._c.close(room))

    # ---- agreement -----------------------------------------------------------

    def agree_start(self, rooms=()):
        """Starts a round of agreement (collective over the instance's TP
        ranks, in the same order on each); returns a Round."""
        return Round(self._c, list(rooms))

    def agree(self, rooms=(), timeout=None):
        """One whole round: {room: Agreed}. timeout (seconds) bounds the wait:
        KvxError ERR_TIMEOUT when it expires (the round is abandoned, which
        leaves this rank out of step with its TP siblings: treat it as fatal)."""
        rnd = self.agree_start(rooms)
        if timeout is None:
            return rnd.wait()
        deadline = time.monotonic() + timeout
        while True:
            out = rnd.test()
            if out is not None:
                return out
            if time.monotonic() > deadline:
                raise KvxError(
                    {
                        "status": int(Status.ERR_TIMEOUT),
                        "status_name": "KVX_ERR_TIMEOUT",
                        "message": _STATUS_MESSAGES[int(Status.ERR_TIMEOUT)],
                        "stage": "agree",
                        "room": None,
                        "origin_rank": self.identity.world_rank,
                        "origin_role": self.role,
                        "origin_instance": self.identity.instance,
                        "origin_tp": self.identity.tp_rank,
                        "injected": False,
                        "count": 1,
                        "foreign": "",
                        "text": "agreement round not done within %.1f s" % timeout,
                        "line": "KVX_ERR_TIMEOUT: agreement round not done within %.1f s"
                        % timeout,
                    }
                )
            time.sleep(0.0002)


def _comm_f(comm):
    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    if isinstance(comm, int):
        return comm
    return comm.py2f()
