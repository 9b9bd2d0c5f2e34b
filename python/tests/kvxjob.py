"""What the multi-rank Python workers share: the job's layout, a KV pattern
every byte of which names where it belongs, and the agreement loop."""

import json
import os
import sys

import numpy as np
from mpi4py import MPI

import kvx


def layout_roles(layout):
    """[(role, instance, tp_rank, tp_size)] by world rank for
    "prefill:AxB,decode:CxD" (the tests' own reading, to size pools before
    the context exists)."""
    ranks = []
    for part in layout.split(","):
        role, shape = part.split(":")
        count, tp = (int(x) for x in shape.split("x"))
        for inst in range(count):
            for t in range(tp):
                ranks.append((role, inst, t, tp))
    return ranks


def me(layout):
    return layout_roles(layout)[MPI.COMM_WORLD.Get_rank()]


def pattern(room, layer, comp, head, token, head_dim):
    """float32 values, exact, unique per (room, layer, comp, head, token, e)."""
    base = ((((room % 97) * 8 + layer) * 2 + comp) * 16 + head) * 4096 + token
    return (base * 64 + np.arange(head_dim, dtype=np.int64)).astype(np.float32) % 16777216


def report(**fields):
    fields.setdefault("rank", MPI.COMM_WORLD.Get_rank())
    sys.stdout.write("KVXRESULT " + json.dumps(fields) + "\n")
    sys.stdout.flush()


def conclude(ctx, rooms, limit=60.0):
    """Agreement rounds until every room is agreed SUCCESS or FAILED on every
    TP rank of the instance; {room: State}."""
    import time

    deadline = time.monotonic() + limit
    while True:
        out = ctx.agree(rooms)
        done = all(
            a.status == kvx.Status.OK and a.state in (kvx.State.SUCCESS, kvx.State.FAILED)
            for a in out.values()
        )
        if ctx.tp_comm.allreduce(int(done), op=MPI.MIN):
            return {r: out[r].state for r in rooms}
        if time.monotonic() > deadline:
            raise RuntimeError("rooms not concluded within %.0f s: %s" % (limit, out))
        time.sleep(0.001)


def close_all(ctx, rooms, limit=30.0):
    import time

    deadline = time.monotonic() + limit
    pending = list(rooms)
    while pending:
        pending = [r for r in pending if ctx.close_room(r) == kvx.Status.ERR_BUSY]
        if pending and time.monotonic() > deadline:
            raise RuntimeError("rooms still busy: %s" % pending)
        if pending:
            time.sleep(0.001)


def env_layout():
    return os.environ["KVX_LAYOUT"]
