"""kvx as an sglang disaggregation transfer backend.

The classes mirror sglang's python/sglang/srt/disaggregation/base/conn.py
(KVArgs, KVPoll, KVManager, KVSender, KVReceiver, KVBootstrapServer) and
raise KVTransferError as sglang's backends do, so that sglang's prefill and
decode schedulers drive kvx unchanged. docs/user/python.md says how to
register it and what maps to what.

What differs from sglang's own backends, on purpose:
 - poll() returns the state every TP rank of the instance agreed on: each
   poll() call takes part in kvx's agreement (one round at a time, started
   at one call and finished at the next), and every TP rank makes the same
   sequence of poll() calls (sglang's schedulers do), so every TP rank gets
   the same answer at the same call and sglang's MIN all-reduce over TP
   changes nothing. A state not agreed yet reads Bootstrapping.
 - failure_exception() raises KVTransferError whose reason is kvx's record
   of the root cause on whichever rank it happened ("room 7 FAILED at post
   on prefill[0].tp1 (rank 1): ..."), never "unknown reason from another
   rank".
 - There is no bootstrap server: kvx bootstraps over MPI when the manager is
   created (collective over the job). KVBootstrapServer is a stand-in.
"""

import ctypes
import re
import time

import kvx

__all__ = [
    "KVArgs",
    "KVBootstrapServer",
    "KVManager",
    "KVPoll",
    "KVReceiver",
    "KVSender",
    "KVTransferError",
    "KVTransferMetric",
    "Provider",
    "get_kv_class",
]


class KVArgs:
    """sglang's KVArgs: what the engine's memory pools are. Used here:
    kv_data_ptrs (every layer's K buffer, then every layer's V buffer; MLA:
    one per layer), kv_data_lens, kv_item_lens (bytes of one page of one
    buffer), aux_data_ptrs/aux_data_lens/aux_item_lens (the metadata
    buffers, one item per request slot), page_size, kv_head_num (this rank's
    KV heads) and total_kv_head_num (the model's). The others (ib_device,
    gpu_id, ...) are accepted and unused: kvx chooses NICs with hwloc."""

    def __init__(self, **fields):
        self.engine_rank = 0
        self.kv_data_ptrs, self.kv_data_lens, self.kv_item_lens = [], [], []
        self.aux_data_ptrs, self.aux_data_lens, self.aux_item_lens = [], [], []
        self.ib_device = None
        self.ib_traffic_class = None
        self.gpu_id = 0
        self.kv_head_num = 0
        self.total_kv_head_num = 0
        self.page_size = 1
        self.pp_rank = 0
        self.prefill_start_layer = 0
        self.system_dp_rank = 0
        for key, value in fields.items():
            setattr(self, key, value)


class KVPoll:
    """sglang's KVPoll; the numbers are kvx's room states (kvx.State)."""

    Failed = int(kvx.State.FAILED)
    Bootstrapping = int(kvx.State.BOOTSTRAPPING)
    WaitingForInput = int(kvx.State.WAITING_FOR_INPUT)
    Transferring = int(kvx.State.TRANSFERRING)
    Success = int(kvx.State.SUCCESS)


class KVTransferError(Exception):
    """sglang's KVTransferError; kvx_error is the KvxError (the whole record)."""

    def __init__(self, bootstrap_room, failure_reason, kvx_error=None):
        super().__init__(failure_reason)
        self.bootstrap_room = bootstrap_room
        self.failure_reason = failure_reason
        self.kvx_error = kvx_error

    def __str__(self):
        return "KVTransferError(bootstrap_room=%s): %s" % (self.bootstrap_room, self.failure_reason)


class KVTransferMetric:
    """sglang's KVTransferMetric."""

    def __init__(self, transfer_latency_s=None, alloc_latency_s=None, transfer_total_bytes=None):
        self.transfer_latency_s = transfer_latency_s
        self.alloc_latency_s = alloc_latency_s
        self.transfer_total_bytes = transfer_total_bytes


class KVBootstrapServer:
    """Stand-in for sglang's bootstrap server: kvx bootstraps over MPI."""

    def __init__(self, host=None, port=None, *args, **kwargs):
        self.host, self.port = host, port

    def close(self):
        pass


def _mode_name(mode):
    name = str(getattr(mode, "value", mode)).lower()
    if name not in ("prefill", "decode"):
        raise ValueError("disaggregation_mode must be prefill or decode, not %r" % (mode,))
    return name


class KVManager:
    """Creates the kvx context over the engine's pools (collective over the
    MPI job: every prefill and decode rank creates its manager together).

    Beyond sglang's arguments (keywords):
      comm, layout, fault   as kvx.Context takes them
      dtype                 the KV element type (default bf16)
      decode_instance_of    room -> decode instance, for the prefill side
                            (default: 0 with one decode instance, else
                            room % decode instances)
      bootstrap_instances   {bootstrap_addr: prefill instance}, for the decode
                            side (default: "prefill:N" or an int names N; with
                            one prefill instance, any address names it)
    sglang's pools keep pages token-major (k_buffer[layer] is [tokens,
    heads, head_dim]): kvx's NHD layout.
    """

    def __init__(
        self,
        args,
        disaggregation_mode,
        server_args=None,
        is_mla_backend=False,
        *,
        comm=None,
        layout=None,
        fault=None,
        dtype="bf16",
        decode_instance_of=None,
        bootstrap_instances=None,
    ):
        self.kv_args = args
        self.mode = _mode_name(disaggregation_mode)
        comps = 1 if is_mla_backend else 2
        nbuf = len(args.kv_data_ptrs)
        if nbuf == 0 or nbuf % comps:
            raise ValueError("kv_data_ptrs has %d buffers for %d per layer" % (nbuf, comps))
        layers = nbuf // comps
        # sglang lists every K buffer, then every V buffer; kvx takes them per layer.
        buffers = [args.kv_data_ptrs[c * layers + layer] for layer in range(layers) for c in range(comps)]
        item = args.kv_item_lens[0]
        elem = kvx.rank_shape(kvx.KVLayout(1, 1, 1, 1, dtype), 1).page_bytes
        heads_local = 1 if is_mla_backend else args.kv_head_num
        head_dim = item // (args.page_size * heads_local * elem)
        kv_heads = 1 if is_mla_backend else (args.total_kv_head_num or args.kv_head_num)
        self.kv_layout = kvx.KVLayout(
            layers,
            args.page_size,
            kv_heads,
            head_dim,
            dtype,
            attn="mla" if is_mla_backend else "mha",
            page_layout="nhd",
        )
        self._aux = list(zip(args.aux_data_ptrs, args.aux_data_lens, args.aux_item_lens))
        aux_slots = min((length // il for _, length, il in self._aux), default=0)
        self.ctx = kvx.Context(
            comm=comm,
            layout=layout,
            kv=self.kv_layout,
            pools=buffers,
            num_pages=args.kv_data_lens[0] // item,
            aux_slots=aux_slots,
            aux_item_size=sum(il for _, _, il in self._aux),
            fault=fault,
        )
        if self.ctx.role != self.mode:
            raise ValueError(
                "this rank is a %s rank of the kvx layout, but sglang runs it as %s"
                % (self.ctx.role, self.mode)
            )
        ident = self.ctx.identity
        self._decode_instance_of = decode_instance_of or (
            lambda room: room % ident.decode_instances
        )
        self._bootstrap_instances = dict(bootstrap_instances or {})
        self._round = None
        self._agreed = {}  # room -> agreed KVPoll value
        self._open = set()
        self._to_close = []

    def register_to_bootstrap(self):
        """Nothing to do: kvx bootstrapped over MPI at creation."""

    # ---- agreement: one round at a time, the same calls on every TP rank ----

    def progress(self):
        """One step of agreement: finishes the round in flight (collective
        over the instance's TP ranks) and starts the next when some room is
        not concluded. poll() calls it; an engine with nothing to poll calls
        it in its loop, on every TP rank alike."""
        if self._round is not None:
            out = self._round.wait()
            self._round = None
            for room, agreed in out.items():
                if agreed.status == kvx.Status.OK:
                    self._agreed[room] = int(agreed.state)
            self._close_pending()
        pending = [r for r in self._open if self._agreed.get(r) not in (KVPoll.Success, KVPoll.Failed)]
        if pending:
            self._round = self.ctx.agree_start(sorted(self._open))

    def state(self, room):
        """The agreed KVPoll of a room (Bootstrapping until agreed)."""
        self.progress()
        return self._agreed.get(room, KVPoll.Bootstrapping)

    def _close_pending(self):
        still = []
        for room in self._to_close:
            if self.ctx.close_room(room) == kvx.Status.ERR_BUSY:
                still.append(room)
            else:
                self._open.discard(room)
                self._agreed.pop(room, None)
        self._to_close = still

    def _opened(self, room):
        self._open.add(room)

    def _release(self, room):
        if room in self._open and room not in self._to_close:
            self._to_close.append(room)
        if self._round is None:
            self._close_pending()

    def failure(self, room):
        return self.ctx.failure(room)

    # ---- aux rows: each metadata buffer's item at aux_index, back to back ----

    def aux_payload(self, index):
        return b"".join(ctypes.string_at(ptr + index * il, il) for ptr, _, il in self._aux)

    def aux_store(self, index, payload):
        off = 0
        for ptr, _, il in self._aux:
            ctypes.memmove(ptr + index * il, payload[off : off + il], il)
            off += il

    def prefill_instance(self, bootstrap_addr):
        if bootstrap_addr in self._bootstrap_instances:
            return self._bootstrap_instances[bootstrap_addr]
        if isinstance(bootstrap_addr, int):
            return bootstrap_addr
        m = re.fullmatch(r"(?:kvx://)?prefill[:/](\d+)", str(bootstrap_addr))
        if m:
            return int(m.group(1))
        if self.ctx.identity.prefill_instances == 1:
            return 0
        raise ValueError("no prefill instance known for bootstrap address %r" % (bootstrap_addr,))

    def decode_instance(self, room):
        return self._decode_instance_of(room)

    def close(self):
        """Finishes the round in flight and destroys the context (collective)."""
        if self._round is not None:
            self._round.wait()
            self._round = None
        self._close_pending()
        self.ctx.close()


class _Transfer:
    """What a sender and a receiver share: the room, its agreed state, its
    failure and its clean-up."""

    def __init__(self, mgr, bootstrap_room):
        self.mgr = mgr
        self.room = int(bootstrap_room)
        self._opened = False
        self._error = None  # a call's own refusal, before the room existed
        self._t_start = None
        self._t_done = None

    def poll(self):
        if self._error is not None and not self._opened:
            return KVPoll.Failed
        if not self._opened:
            return KVPoll.Bootstrapping
        state = self.mgr.state(self.room)
        if state == KVPoll.Success and self._t_done is None:
            self._t_done = time.monotonic()
            self._succeeded()
        return state

    def _succeeded(self):
        pass

    def failure_exception(self):
        err = self.mgr.failure(self.room) if self._opened else None
        err = err or self._error
        if err is None:
            reason = "room %d has not failed (state %s)" % (self.room, self.poll())
        else:
            reason = str(err)
        raise KVTransferError(self.room, reason, err)

    def abort(self):
        if not self._opened:
            return
        try:
            self.mgr.ctx.abort(self.room, "aborted by the sglang scheduler")
        except kvx.KvxError as e:
            if e.status != kvx.Status.ERR_STATE:
                raise

    def clear(self):
        if self._opened:
            self.mgr._release(self.room)

    def _metric(self, nbytes):
        latency = None
        if self._t_start is not None and self._t_done is not None:
            latency = self._t_done - self._t_start
        return KVTransferMetric(transfer_latency_s=latency, transfer_total_bytes=nbytes)


class KVSender(_Transfer):
    """Prefill side of one request (sglang's BaseKVSender)."""

    def __init__(self, mgr, bootstrap_addr, bootstrap_room, dest_tp_ranks=None, pp_rank=0, *args, **kwargs):
        super().__init__(mgr, bootstrap_room)
        self.bootstrap_addr = bootstrap_addr
        self.total = 0
        self.sent = 0
        self.aux_index = None

    def init(self, num_kv_indices, aux_index=None):
        """Opens the room for num_kv_indices pages to its decode instance."""
        self.total = int(num_kv_indices)
        self.aux_index = aux_index
        self._t_start = time.monotonic()
        try:
            self.mgr.ctx.send_open(self.room, self.mgr.decode_instance(self.room), self.total)
        except kvx.KvxError as e:
            self._error = e
            return
        self._opened = True
        self.mgr._opened(self.room)

    def send(self, kv_indices, state_indices=None, *args, **kwargs):
        """Hands over the next pages; the chunk that completes the room
        carries the aux row (each metadata buffer's item at aux_index)."""
        if not self._opened:
            return
        pages = kvx._pages(kv_indices)
        self.sent += len(pages)
        aux = None
        if self.sent >= self.total and self.aux_index is not None:
            aux = self.mgr.aux_payload(self.aux_index)
        try:
            self.mgr.ctx.send_chunk(self.room, pages, aux)
        except kvx.KvxError as e:
            if e.status != kvx.Status.ERR_STATE:
                # A refused chunk writes nothing: fail the room for everyone,
                # with the refusal as its reason, rather than leave it waiting.
                self.mgr.ctx.abort(self.room, str(e)[:200])

    def get_transfer_metric(self):
        info = self.mgr.ctx.info(self.room) if self._opened and self.room in self.mgr._open else None
        return self._metric(info["bytes"] if info else None)

    def pop_decode_prefix_len(self):
        return 0

    def should_send_kv_chunk(self, num_pages, last_chunk):
        return num_pages > 0


class KVReceiver(_Transfer):
    """Decode side of one request (sglang's BaseKVReceiver)."""

    def __init__(self, mgr, bootstrap_addr, bootstrap_room=None, *args, **kwargs):
        super().__init__(mgr, bootstrap_room if bootstrap_room is not None else 0)
        self.bootstrap_addr = bootstrap_addr
        self.prefill_instance = None
        self.aux_index = None

    def init(self, prefill_dp_rank=None):
        """Resolves the prefill instance from the bootstrap address."""
        try:
            self.prefill_instance = self.mgr.prefill_instance(self.bootstrap_addr)
        except ValueError as e:
            self._error = KVTransferError(self.room, str(e))

    def send_metadata(self, kv_indices, aux_index=None, state_indices=None, *args, **kwargs):
        """Opens the room: the pages to receive into, and the aux slot."""
        if self.prefill_instance is None:
            self.init()
        if self._error is not None:
            return
        self.aux_index = aux_index
        self._t_start = time.monotonic()
        try:
            self.mgr.ctx.recv_open(
                self.room, self.prefill_instance, kv_indices, -1 if aux_index is None else aux_index
            )
        except kvx.KvxError as e:
            self._error = e
            return
        self._opened = True
        self.mgr._opened(self.room)

    def _succeeded(self):
        # The aux row landed in kvx's slot: copy it into the engine's buffers.
        if self.aux_index is not None and self.mgr._aux:
            self.mgr.aux_store(self.aux_index, self.mgr.ctx.aux(self.room))


class Provider:
    """sglang's dynamic backend provider (DisaggBackendProvider): sglang
    versions that load a transfer backend by module and class name call
    get_kv_class(class_type) on it."""

    _CLASSES = {
        "kvargs": KVArgs,
        "manager": KVManager,
        "sender": KVSender,
        "receiver": KVReceiver,
        "bootstrap_server": KVBootstrapServer,
    }

    def get_kv_class(self, class_type):
        return self._CLASSES.get(str(getattr(class_type, "value", class_type)))


def get_kv_class(class_type):
    """The kvx class for one of sglang's KVClassType members (or its value)."""
    return Provider().get_kv_class(class_type)
