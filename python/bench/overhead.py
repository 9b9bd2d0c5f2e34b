#!/usr/bin/env python3
"""overhead.py - what the Python layer costs per call, against the same
calls made from C in the same process and the same run: kvx_room_poll()
calls per second and whole agreement rounds per second over R open rooms.

    PYTHONPATH=build/python launch/kvx-run --layout prefill:1x2,decode:1x2 -- \
        /usr/bin/python3 python/bench/overhead.py [--rooms 16] [--polls 200000] [--rounds 2000]

Rank 0 prints one row per measurement (every TP rank runs the rounds: they
are collective over the instance's TP ranks).
"""

import argparse
import sys
import time

import kvx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rooms", type=int, default=16)
    ap.add_argument("--polls", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=2000)
    o = ap.parse_args()
    kv = kvx.KVLayout(layers=2, page_size=16, kv_heads=4, head_dim=64, dtype="fp16")
    ctx = kvx.Context(kv=kv, num_pages=4 * o.rooms, aux_slots=o.rooms, aux_item_size=8)
    rooms = list(range(1, o.rooms + 1))
    for room in rooms:
        pages = [4 * (room - 1) + i for i in range(4)]
        if ctx.role == "decode":
            ctx.recv_open(room, 0, pages, aux_slot=room - 1)
        else:
            ctx.send_open(room, 0, 4)
            ctx.send_chunk(room, pages, aux=b"12345678")
    # Agreed SUCCESS (status OK), not this rank's own state: a room not
    # agreed yet reports its local state with status INPROGRESS, and TP ranks
    # stopping on local states would stop after different rounds.
    while not all(
        a.status == kvx.Status.OK and a.state == kvx.State.SUCCESS
        for a in ctx.agree(rooms).values()
    ):
        time.sleep(0.001)
    rows = []

    # Polls: the bound C method, the same loop in C; the best of 3, every
    # rank polling at once (a rank waiting in a round would spin on a core).
    from mpi4py import MPI

    poll, n, py, c = ctx.poll, o.polls, float("inf"), float("inf")
    for _ in range(3):
        MPI.COMM_WORLD.Barrier()
        t0 = time.perf_counter()
        for i in range(n):
            poll(rooms[i % o.rooms])
        py = min(py, time.perf_counter() - t0)
        MPI.COMM_WORLD.Barrier()
        c = min(c, ctx._c.bench_c("poll", rooms, n))
    rows.append(("poll", n, n / py, n / c))

    # Agreement rounds over every room: Context.agree (a dict of Agreed),
    # the raw round object, and the C loop.
    n = o.rounds
    ctx.tp_comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        ctx.agree(rooms)
    py = time.perf_counter() - t0
    ctx.tp_comm.Barrier()
    t0 = time.perf_counter()
    raw = ctx._c
    for _ in range(n):
        raw.agree_start(rooms).wait()
    py_raw = time.perf_counter() - t0
    ctx.tp_comm.Barrier()
    c = ctx._c.bench_c("agree", rooms, n)
    rows.append(("agree (Context.agree)", n, n / py, n / c))
    rows.append(("agree (raw round)", n, n / py_raw, n / c))

    for room in rooms:
        ctx.close_room(room)
    ident = ctx.identity
    if ident.world_rank == 0:
        print("# kvx Python overhead: %s[%d].tp%d, layout %s, %d rooms open"
              % (ident.role, ident.instance, ident.tp_rank,
                 "prefill:%dx%d,decode:%dx%d" % (ident.prefill_instances, ident.prefill_tp,
                                                 ident.decode_instances, ident.decode_tp), o.rooms))
        print("# %-22s %10s %14s %14s %12s %10s" % ("call", "n", "python/s", "C/s", "py us/call", "added us"))
        for name, n, py_rate, c_rate in rows:
            print("  %-22s %10d %14.0f %14.0f %12.2f %10.2f"
                  % (name, n, py_rate, c_rate, 1e6 / py_rate, 1e6 / py_rate - 1e6 / c_rate))
        sys.stdout.flush()
    ctx.close()


if __name__ == "__main__":
    main()
