#!/usr/bin/env python3
"""engine.py - the loop of a serving engine on kvx, in Python. Run it as one
job of prefill and decode ranks (docs/user/python.md):

    PYTHONPATH=build/python launch/kvx-run --layout prefill:1x2,decode:1x2 -- \
        /usr/bin/python3 examples/python/engine.py

Each request (room) moves 4 pages and an 8-byte aux row (its first token);
every step is one agreement round, so every TP rank sees each outcome alike.
"""
import kvx

kv = kvx.KVLayout(layers=4, page_size=16, kv_heads=8, head_dim=64, dtype="fp16")
ctx = kvx.Context(kv=kv, num_pages=256, aux_slots=64, aux_item_size=8)  # layout: KVX_LAYOUT
rooms, done = range(1, 33), {}
for room in rooms:
    pages = [4 * (room % 64) + i for i in range(4)]
    if ctx.role == "decode":
        ctx.recv_open(room, 0, pages, aux_slot=room % 64)
    else:
        ctx.send_open(room, 0, len(pages))
        ctx.send_chunk(room, pages, aux=room.to_bytes(8, "little"))
while len(done) < len(rooms):  # the scheduler's step: one round of agreement
    for room, agreed in ctx.agree([r for r in rooms if r not in done]).items():
        if agreed.status == kvx.Status.OK and agreed.state in (kvx.State.SUCCESS, kvx.State.FAILED):
            done[room] = ctx.failure(room) or (ctx.aux(room) if ctx.role == "decode" else b"sent")
for room in rooms:
    ctx.close_room(room)
ok = sum(not isinstance(v, kvx.KvxError) for v in done.values())
print("%s[%d].tp%d: %d of %d rooms SUCCESS%s" % (ctx.role, ctx.identity.instance, ctx.identity.tp_rank,
      ok, len(rooms), "".join("\n  " + str(v) for v in done.values() if isinstance(v, kvx.KvxError))))
ctx.close()
