"""A multi-rank worker: rooms from prefill to decode through kvx.Context
with pools the test chooses (numpy buffers, torch tensors, a slab, or kvx's
own), every byte checked on the decode against the pattern that names it.

    rooms_worker.py [--pool numpy|torch|slab|kvx] [--page-layout hnd|nhd|head_major]
                    [--rooms N] [--fault RULES] [--verify off|sample|full]
"""

import argparse
import struct

import numpy as np

import kvx
import kvxjob

PAGE_SIZE, HEAD_DIM, LAYERS, KV_HEADS = 4, 8, 2, 4
MAX_TOKENS = 29


def page_view(buf, page_layout, page):
    """[heads, page_size, head_dim] of one page of a (layer, comp) buffer."""
    if page_layout == "hnd":
        return buf[page]
    if page_layout == "nhd":
        return buf[page].transpose(1, 0, 2)
    return buf[:, page]


def buffer_shape(page_layout, num_pages, heads):
    if page_layout == "hnd":
        return (num_pages, heads, PAGE_SIZE, HEAD_DIM)
    if page_layout == "nhd":
        return (num_pages, PAGE_SIZE, heads, HEAD_DIM)
    return (heads, num_pages, PAGE_SIZE, HEAD_DIM)


def rows(arrays, page_layout, shape, room, pages):
    """(view, pattern) of every token row of this rank's heads in the room's
    pages, over every (layer, comp) buffer."""
    for b, arr in enumerate(arrays):
        layer, comp = divmod(b, 2)
        for i, page in enumerate(pages):
            view = page_view(arr, page_layout, page)
            for h in range(shape.heads):
                for t in range(PAGE_SIZE):
                    token = i * PAGE_SIZE + t
                    yield view[h, t], kvxjob.pattern(
                        room, layer, comp, shape.first_head + h, token, HEAD_DIM
                    )


def room_plan(rooms, num_pages):
    """Per room: tokens, the prefill's pages (back to back) and the decode's
    (scattered over the pool) -- the same on every rank."""
    rng = np.random.default_rng(1234)
    free = rng.permutation(num_pages).tolist()
    plan, src = {}, 0
    for i in range(rooms):
        room = 1000 + i
        tokens = 1 + (i * 7919) % MAX_TOKENS
        n = -(-tokens // PAGE_SIZE)
        plan[room] = (tokens, list(range(src, src + n)), [free.pop() for _ in range(n)])
        src += n
    return plan


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", default="numpy")
    ap.add_argument("--page-layout", default="hnd")
    ap.add_argument("--rooms", type=int, default=12)
    ap.add_argument("--fault", default=None)
    ap.add_argument("--verify", default=None)
    ap.add_argument("--layerwise", action="store_true")
    o = ap.parse_args()

    layout = kvxjob.env_layout()
    role, _, tp_rank, tp_size = kvxjob.me(layout)
    kv = kvx.KVLayout(LAYERS, PAGE_SIZE, KV_HEADS, HEAD_DIM, "fp32", page_layout=o.page_layout)
    shape = kvx.rank_shape(kv, tp_size, tp_rank)
    num_pages = 8 * o.rooms
    bshape = buffer_shape(o.page_layout, num_pages, shape.heads)
    if o.pool == "torch":
        import torch

        pools = [[torch.zeros(bshape, dtype=torch.float32) for _ in range(2)] for _ in range(LAYERS)]
        arrays = [b.numpy() for pair in pools for b in pair]
    elif o.pool == "slab":
        pools = np.zeros((LAYERS, 2) + bshape, dtype=np.float32)
        arrays = [pools[layer, c] for layer in range(LAYERS) for c in range(2)]
    elif o.pool == "flashinfer":
        # [num_blocks, 2, <page>] per layer: K and V interleaved in each block.
        import torch

        pools = [torch.zeros((num_pages, 2) + bshape[1:], dtype=torch.float32) for _ in range(LAYERS)]
        arrays = [pools[layer][:, c].numpy() for layer in range(LAYERS) for c in range(2)]
        pools = kvx.kv_interleaved(pools)
    elif o.pool == "layers":
        # [num_blocks, layers, 2, <page>]: every layer in one tensor.
        import torch

        whole = torch.zeros((num_pages, LAYERS, 2) + bshape[1:], dtype=torch.float32)
        arrays = [whole[:, layer, c].numpy() for layer in range(LAYERS) for c in range(2)]
        pools = kvx.layers_interleaved(whole)
    elif o.pool == "numpy":
        pools = [np.zeros(bshape, dtype=np.float32) for _ in range(LAYERS * 2)]
        arrays = pools
    else:
        pools = None
    ctx = kvx.Context(
        layout=layout,
        kv=kv,
        pools=pools,
        num_pages=num_pages if pools is None else None,
        aux_slots=o.rooms,
        aux_item_size=16,
        fault=o.fault,
        verify=o.verify,
    )
    assert (ctx.first_head, ctx.heads, ctx.page_bytes) == tuple(shape), (ctx.heads, shape)
    assert ctx.num_pages == num_pages
    if pools is None:
        arrays = [
            ctx.kv_array(b // 2, b % 2).view(np.float32).reshape(bshape) for b in range(LAYERS * 2)
        ]
    plan = room_plan(o.rooms, num_pages)
    rooms = sorted(plan)
    if role == "decode":
        for slot, room in enumerate(rooms):
            ctx.recv_open(room, 0, np.array(plan[room][2], dtype=np.uint32), aux_slot=slot)
    else:
        for room in rooms:
            tokens, src, _ = plan[room]
            ctx.send_open(room, 0, len(src))
            for view, want in rows(arrays, o.page_layout, shape, room, src):
                view[:] = want
            half = max(1, len(src) // 2)
            aux = struct.pack("<QI", room, tokens)
            if o.layerwise:
                # The last layer first, each layer in two hand-overs; the aux
                # rides on the one that completes the room.
                for layer in reversed(range(LAYERS)):
                    last = layer == 0
                    if len(src) > 1:
                        ctx.send_layers(room, src[:half], layer)
                    ctx.send_layers(
                        room, src[half:] if len(src) > 1 else src, layer, 1, aux if last else None
                    )
                continue
            try:
                if len(src) > 1:
                    ctx.send_chunk(room, src[:half])
                ctx.send_chunk(
                    room, src[half:] if len(src) > 1 else src, struct.pack("<QI", room, tokens)
                )
            except kvx.KvxError as e:
                # A room that already failed (an injected fault) refuses chunks.
                assert e.status == kvx.Status.ERR_STATE, str(e)
    states = kvxjob.conclude(ctx, rooms)
    bad, failures = 0, {}
    for room in rooms:
        if states[room] == kvx.State.FAILED:
            try:
                ctx.raise_failure(room)
                raise AssertionError("room %d FAILED without a failure record" % room)
            except kvx.KvxError as e:
                failures[room] = dict(
                    line=str(e),
                    status=e.status.name,
                    stage=e.stage,
                    origin=list(e.origin),
                    injected=e.injected,
                    sentence=e.sentence,
                    room=e.room,
                )
            continue
        if role != "decode":
            continue
        tokens, _, dst = plan[room]
        if ctx.aux(room) != struct.pack("<QI", room, tokens):
            bad += 1
        for view, want in rows(arrays, o.page_layout, shape, room, dst):
            bad += int(np.count_nonzero(view != want))
    kvxjob.close_all(ctx, rooms)
    ident = ctx.identity
    membership = ctx.membership()
    join_address = ctx.join_address()
    ctx.close()
    kvxjob.report(
        role=role,
        tp=tp_rank,
        states={str(r): s.name for r, s in states.items()},
        failures={str(r): f for r, f in failures.items()},
        bad=bad,
        identity=ident._asdict(),
        membership=membership,
        join_address=join_address,
    )


if __name__ == "__main__":
    main()
