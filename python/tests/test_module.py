"""The kvx module on one process: versions, the tables taken from libkvx,
the pre-creation geometry helper and the exception's record and format."""

import os
import re

import pytest

import kvx
from kvx import _kvx

SRC = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(__file__), "..", "..")


def header():
    with open(os.path.join(SRC, "include", "kvx.h")) as f:
        return f.read()


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", kvx.version())
    v = kvx.versions()
    assert v["kvx"] == kvx.version() and v["ucx"] and v["mpi"]


def test_statuses_are_libkvx_table():
    # Every row of KVX_STATUS_MAP in kvx.h, read here only to check that the
    # module's enum, built from libkvx at import, has each one.
    rows = re.findall(r"X\((\w+), (-?\d+), \"([^\"]+)\"\)", header())
    assert len(rows) > 20
    assert len(kvx.Status) == len(rows)
    for name, value, msg in rows:
        assert kvx.Status[name] == int(value)
    assert kvx.Status.ERR_INJECTED < 0 and kvx.Status.OK == 0


def test_states_and_stages():
    assert [s.name for s in kvx.State] == [
        "FAILED", "BOOTSTRAPPING", "WAITING_FOR_INPUT", "TRANSFERRING", "SUCCESS"]
    assert [int(s) for s in kvx.State] == [0, 1, 2, 3, 4]
    stages = re.findall(r"X\((\w+), \"(\w+)\"\)", header())
    assert [s.name for s in kvx.Stage] == [name for name, _ in stages]


def test_rank_shape():
    kv = kvx.KVLayout(layers=3, page_size=16, kv_heads=8, head_dim=128, dtype="bf16")
    assert kvx.rank_shape(kv, 1) == (0, 8, 16 * 8 * 128 * 2)
    assert kvx.rank_shape(kv, 4, 3) == (6, 2, 16 * 2 * 128 * 2)
    # More ranks than heads: heads replicated, rank r holds head r / (tp / heads).
    kv2 = kvx.KVLayout(layers=1, page_size=4, kv_heads=2, head_dim=8, dtype="fp32")
    assert kvx.rank_shape(kv2, 8, 5) == (1, 1, 4 * 8 * 4)
    import torch

    kv3 = kvx.KVLayout(1, 4, 2, 8, torch.float16)
    assert kvx.rank_shape(kv3, 2).page_bytes == 4 * 8 * 2


def test_rank_shape_refusal_is_kvx_error():
    kv = kvx.KVLayout(layers=1, page_size=4, kv_heads=3, head_dim=8, dtype="fp32")
    with pytest.raises(kvx.KvxError) as info:
        kvx.rank_shape(kv, 2, 0)
    e = info.value
    assert e.status == kvx.Status.ERR_INVALID_PARAM
    assert "kv_heads=3 cannot be split over TP 2" in e.sentence
    assert str(e).startswith("KVX_ERR_INVALID_PARAM at init on ")
    assert e.room is None and e.origin.rank == -1
    with pytest.raises(ValueError):
        kvx.rank_shape(kvx.KVLayout(1, 4, 2, 8, "fp64"), 1)


def test_context_without_mpi_is_refused():
    # Fortran handle 0 is MPI_COMM_WORLD in Open MPI and MPICH; MPI is not
    # initialized in this process (mpi4py is not imported), so kvx refuses.
    kv = kvx.KVLayout(1, 4, 2, 8, "fp32")
    with pytest.raises(kvx.KvxError) as info:
        kvx.Context(comm=0, layout="prefill:1x1,decode:1x1", kv=kv, num_pages=4)
    assert info.value.status == kvx.Status.ERR_MPI
    assert "MPI is not initialized" in str(info.value)
