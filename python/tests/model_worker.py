"""The real-model job: a prefill instance runs each prompt of a small torch
transformer (tinymodel.py) in chunks, writing K/V into its paged pool (torch
tensors registered with kvx) and handing each chunk's pages to kvx as soon as
they are computed, the first generated token as the aux payload; the decode
instance receives the pages into scattered pages of its own pool and
generates from them. Every rank also runs the same model colocated (one
process, TP 1, no transfer) and reports how its own output compares.

    model_worker.py [--rooms N] [--steps N] [--fault RULES]
"""

import argparse
import struct
import time

import torch

import kvx
import kvxjob
import tinymodel

LENGTHS = [3, 17, 9, 29, 4, 22, 12, 8]


def prompts(cfg, rooms):
    g = torch.Generator().manual_seed(7)
    return {
        3000 + i: torch.randint(cfg.vocab, (LENGTHS[i % len(LENGTHS)],), generator=g).tolist()
        for i in range(rooms)
    }


def prefill(ctx, model, pool, reqs, chunk_pages):
    """Each prompt in chunks; each chunk's pages go to kvx once computed."""
    P, src, first = model.cfg.page_size, 0, {}
    for room, prompt in reqs.items():
        n = -(-len(prompt) // P)
        pages = list(range(src, src + n))
        src += n
        ctx.send_open(room, 0, n)
        step, sent = chunk_pages * P, 0
        try:
            for s in range(0, len(prompt), step):
                e = min(s + step, len(prompt))
                out = model.forward(pool, pages, prompt[s:e], s)
                done = -(-e // P) if e == len(prompt) else e // P
                aux = struct.pack("<q", int(out.argmax())) if e == len(prompt) else None
                ctx.send_chunk(room, pages[sent:done], aux)
                sent = done
        except kvx.KvxError as e:
            # A room that failed (an injected fault) refuses later chunks.
            assert e.status == kvx.Status.ERR_STATE, str(e)
            # The prompt still runs to the end: the TP siblings' allreduces wait for it.
            for s2 in range(s + step, len(prompt), step):
                out = model.forward(pool, pages, prompt[s2 : s2 + step], s2)
        first[room] = out
    return first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rooms", type=int, default=6)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--chunk-pages", type=int, default=2)
    ap.add_argument("--fault", default=None)
    ap.add_argument("--corrupt", type=int, default=None,
                    help="a control: the decode zeroes this received room's V of one layer")
    o = ap.parse_args()
    t0 = time.monotonic()
    torch.set_num_threads(1)
    layout = kvxjob.env_layout()
    role, _, tp_rank, tp_size = kvxjob.me(layout)
    cfg = tinymodel.Config()
    kv = kvx.KVLayout(cfg.layers, cfg.page_size, cfg.kv_heads, cfg.head_dim, torch.float32)
    shape = kvx.rank_shape(kv, tp_size, tp_rank)
    model = tinymodel.Model(cfg, tp_size, tp_rank, None, shape.first_head, shape.heads)
    reqs = prompts(cfg, o.rooms)
    P = cfg.page_size
    need = sum(-(-(len(p) + o.steps) // P) for p in reqs.values())
    num_pages = need + 7
    pool = model.pool(num_pages)
    ctx = kvx.Context(
        layout=layout, kv=kv, pools=pool, aux_slots=o.rooms, aux_item_size=8, fault=o.fault
    )
    model.comm = ctx.tp_comm
    rooms = sorted(reqs)
    result = {}
    if role == "decode":
        # Scattered pages: every room's pages come from a shuffled free list.
        free = torch.randperm(num_pages, generator=torch.Generator().manual_seed(11)).tolist()
        pages = {}
        for slot, room in enumerate(rooms):
            n_recv = -(-len(reqs[room]) // P)
            n_all = -(-(len(reqs[room]) + o.steps) // P)
            pages[room] = [free.pop() for _ in range(n_all)]
            ctx.recv_open(room, 0, pages[room][:n_recv], aux_slot=slot)
        states = kvxjob.conclude(ctx, rooms)
        for room in rooms:
            if states[room] == kvx.State.SUCCESS:
                (first,) = struct.unpack("<q", ctx.aux(room))
                if room == o.corrupt:
                    pool[1][1][pages[room][: -(-len(reqs[room]) // P)]] = 0.0
                tokens, logits = tinymodel.generate(
                    model, pool, pages[room], reqs[room], o.steps, first=first
                )
                result[room] = dict(tokens=tokens, logits=logits)
    else:
        first = prefill(ctx, model, pool, reqs, o.chunk_pages)
        states = kvxjob.conclude(ctx, rooms)
        for room in rooms:
            result[room] = dict(tokens=[int(first[room].argmax())], logits=[first[room]])
    t_job = time.monotonic() - t0
    failures = {}
    for room in rooms:
        e = ctx.failure(room)
        if e is not None:
            failures[str(room)] = dict(
                line=str(e), origin=list(e.origin), stage=e.stage, status=e.status.name,
                injected=e.injected, sentence=e.sentence)
    kvxjob.close_all(ctx, rooms)
    ctx.close()
    # The same model colocated: one process, TP 1, the whole prompt at once.
    ref_model = tinymodel.Model(cfg)
    compare = {}
    for room in rooms:
        if room not in result:
            continue
        ref_pool = ref_model.pool(-(-(len(reqs[room]) + o.steps) // P))
        ref_tokens, ref_logits = tinymodel.generate(
            ref_model, ref_pool, list(range(len(ref_pool[0][0]))), reqs[room], o.steps
        )
        mine = result[room]
        if role == "decode":
            want_tokens, want_logits = ref_tokens, ref_logits[1:]
            got_logits = mine["logits"]
        else:
            want_tokens, want_logits = ref_tokens[:1], ref_logits[:1]
            got_logits = mine["logits"]
        diff = max(float((a - b).abs().max()) for a, b in zip(got_logits, want_logits)) if got_logits else 0.0
        compare[str(room)] = dict(tokens=mine["tokens"], ref_tokens=want_tokens, max_logit_diff=diff)
    kvxjob.report(
        role=role,
        tp=tp_rank,
        states={str(r): s.name for r, s in states.items()},
        failures=failures,
        compare=compare,
        seconds=round(t_job, 3),
    )


if __name__ == "__main__":
    main()
