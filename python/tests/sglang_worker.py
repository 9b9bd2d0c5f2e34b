"""Drives kvx.sglang as sglang's schedulers drive a transfer backend, on a
prefill and a decode instance: pools shaped as sglang's (k_buffer[layer] is
[tokens, heads, head_dim] per rank; metadata buffers indexed by request
slot), KVSender/KVReceiver per request, poll() of every request each loop
iteration followed by sglang's MIN all-reduce over the TP ranks -- which must
change nothing -- and failure_exception() for the failed ones.

    sglang_worker.py [--requests N] [--fault RULES]
"""

import argparse
import time

import numpy as np
import torch

import kvx
import kvxjob
from kvx import sglang as kvs

LAYERS, PAGE, KV_HEADS, HEAD_DIM = 2, 4, 4, 8


def pools(tp_size, tp_rank, num_pages, slots):
    heads = kvx.rank_shape(kvx.KVLayout(LAYERS, PAGE, KV_HEADS, HEAD_DIM, "fp16"), tp_size, tp_rank)
    k = [torch.zeros((num_pages * PAGE, heads.heads, HEAD_DIM), dtype=torch.float16) for _ in range(LAYERS)]
    v = [torch.zeros_like(k[0]) for _ in range(LAYERS)]
    meta = [torch.zeros((slots, 8), dtype=torch.int32), torch.zeros((slots, 4), dtype=torch.float32)]
    args = kvs.KVArgs(
        kv_data_ptrs=[t.data_ptr() for t in k + v],
        kv_data_lens=[t.numel() * t.element_size() for t in k + v],
        kv_item_lens=[k[0][0].numel() * 2 * PAGE] * (2 * LAYERS),
        aux_data_ptrs=[m.data_ptr() for m in meta],
        aux_data_lens=[m.numel() * m.element_size() for m in meta],
        aux_item_lens=[m[0].numel() * m.element_size() for m in meta],
        kv_head_num=heads.heads,
        total_kv_head_num=KV_HEADS,
        page_size=PAGE,
    )
    return args, k, v, meta, heads


def token_values(room, layer, comp, head, token):
    return torch.tensor(kvxjob.pattern(room, layer, comp, head, token, HEAD_DIM) % 2048, dtype=torch.float16)


def fill_or_check(k, v, heads, room, pages, check):
    bad = 0
    for layer in range(LAYERS):
        for comp, buf in enumerate((k[layer], v[layer])):
            for i, page in enumerate(pages):
                for t in range(PAGE):
                    for h in range(heads.heads):
                        want = token_values(room, layer, comp, heads.first_head + h, i * PAGE + t)
                        row = buf[page * PAGE + t, h]
                        if check:
                            bad += int((row != want).sum())
                        else:
                            row.copy_(want)
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--fault", default=None)
    o = ap.parse_args()
    layout = kvxjob.env_layout()
    role, _, tp_rank, tp_size = kvxjob.me(layout)
    num_pages = 8 * o.requests
    args, k, v, meta, heads = pools(tp_size, tp_rank, num_pages, o.requests)
    mgr = kvs.KVManager(args, role, None, False, layout=layout, fault=o.fault, dtype="fp16")
    tp = mgr.ctx.tp_comm
    rooms = [5000 + i for i in range(o.requests)]
    npages = {room: 1 + (i * 5) % 7 for i, room in enumerate(rooms)}
    rng = np.random.default_rng(3)
    free = rng.permutation(num_pages).tolist()
    if role == "decode":
        dst = {room: np.array([free.pop() for _ in range(npages[room])], dtype=np.int32) for room in rooms}
        conns = {}
        for slot, room in enumerate(rooms):
            r = kvs.KVReceiver(mgr, "prefill:0", room)
            r.init(0)
            r.send_metadata(dst[room], slot)
            conns[room] = r
    else:
        src, conns, first = {}, {}, 0
        for slot, room in enumerate(rooms):
            src[room] = np.arange(first, first + npages[room], dtype=np.int32)
            first += npages[room]
            s = kvs.KVSender(mgr, "prefill:0", room, [0], 0)
            s.init(npages[room], slot)
            conns[room] = s
    sent, final, reasons, steps, not_noop = set(), {}, {}, 0, 0
    deadline = time.monotonic() + 60
    while len(final) < len(rooms):
        steps += 1
        active = [room for room in rooms if room not in final]
        polls = np.array([conns[room].poll() for room in active], dtype=np.int64)
        # sglang's poll_and_all_reduce: MIN over the TP ranks.
        lo, hi = polls.copy(), polls.copy()
        from mpi4py import MPI

        tp.Allreduce(MPI.IN_PLACE, lo, op=MPI.MIN)
        tp.Allreduce(MPI.IN_PLACE, hi, op=MPI.MAX)
        not_noop += int(np.count_nonzero(lo != hi))
        for room, state in zip(active, lo.tolist()):
            if role == "prefill" and state == kvs.KVPoll.WaitingForInput and room not in sent:
                # The prefill forward pass, then its pages in two chunks.
                fill_or_check(k, v, heads, room, src[room], check=False)
                slot = rooms.index(room)
                meta[0][slot] = torch.arange(8, dtype=torch.int32) + room
                meta[1][slot] = float(room) / 7
                half = max(1, npages[room] // 2)
                if npages[room] > 1:
                    conns[room].send(src[room][:half])
                conns[room].send(src[room][half:] if npages[room] > 1 else src[room])
                sent.add(room)
            if state in (kvs.KVPoll.Success, kvs.KVPoll.Failed):
                final[room] = state
                if state == kvs.KVPoll.Failed:
                    try:
                        conns[room].failure_exception()
                    except kvs.KVTransferError as e:
                        reasons[str(room)] = dict(text=str(e), room=e.bootstrap_room, origin=list(e.kvx_error.origin))
        if time.monotonic() > deadline:
            raise RuntimeError("requests not done: %s" % {r: conns[r].poll() for r in rooms if r not in final})
    bad, metrics = 0, {}
    for slot, room in enumerate(rooms):
        if role == "decode" and final[room] == kvs.KVPoll.Success:
            bad += fill_or_check(k, v, heads, room, dst[room], check=True)
            bad += int((meta[0][slot] != torch.arange(8, dtype=torch.int32) + room).sum())
            bad += int((meta[1][slot] != float(room) / 7).sum())
        if role == "prefill":
            m = conns[room].get_transfer_metric()
            metrics[str(room)] = m.transfer_total_bytes
        conns[room].clear()
    mgr.close()
    kvxjob.report(
        role=role,
        tp=tp_rank,
        final={str(r): s for r, s in final.items()},
        reasons=reasons,
        bad=bad,
        not_noop=not_noop,
        steps=steps,
        metrics=metrics,
    )


if __name__ == "__main__":
    main()
