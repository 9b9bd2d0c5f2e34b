"""Real 2-, 3- and 4-rank jobs through kvx.Context: every byte checked on the
decode, pools as numpy arrays, torch tensors, one slab, or kvx's own; and an
injected failure raised as KvxError with its origin on every rank."""

import pytest

import kvx

import mpijob

CASES = [
    # (layout, ranks, pool, page layout)
    ("prefill:1x1,decode:1x1", 2, "numpy", "hnd"),
    ("prefill:1x2,decode:1x2", 4, "torch", "nhd"),
    ("prefill:1x2,decode:1x1", 3, "slab", "head_major"),
    ("prefill:1x1,decode:1x2", 3, "kvx", "hnd"),
    # page_stride: K and V interleaved per block, every layer in one tensor
    ("prefill:1x1,decode:1x1", 2, "flashinfer", "nhd"),
    ("prefill:1x2,decode:1x1", 3, "layers", "hnd"),
    ("prefill:1x1,decode:1x2", 3, "flashinfer", "hnd"),
]


@pytest.mark.parametrize("layout,np_,pool,page_layout", CASES)
def test_rooms_byte_exact(layout, np_, pool, page_layout):
    job = mpijob.run(
        np_,
        "rooms_worker.py",
        ["--pool", pool, "--page-layout", page_layout, "--rooms", 12],
        env={"KVX_LAYOUT": layout},
    )
    for r in job.results:
        assert set(r["states"].values()) == {"SUCCESS"}, r
        assert r["bad"] == 0, r
        assert r["failures"] == {}
    roles = sorted(r["identity"]["role"] for r in job.results)
    # No job key: no instance joins, the epoch stays 0 on every rank.
    assert [r["membership"] for r in job.results] == [0] * len(job.results)
    # and no rank serves a door.
    assert [r["join_address"] for r in job.results] == [None] * len(job.results)
    assert roles.count("prefill") == job.results[0]["identity"]["prefill_tp"]


@pytest.mark.parametrize(
    "layout,np_", [("prefill:1x1,decode:1x1", 2), ("prefill:1x2,decode:1x1", 3)]
)
def test_rooms_layerwise_byte_exact(layout, np_):
    job = mpijob.run(
        np_,
        "rooms_worker.py",
        ["--pool", "torch", "--page-layout", "nhd", "--rooms", 12, "--layerwise"],
        env={"KVX_LAYOUT": layout},
    )
    for r in job.results:
        assert set(r["states"].values()) == {"SUCCESS"}, r
        assert r["bad"] == 0, r


def test_injected_failure_names_its_origin_everywhere():
    rule = "stage=post,role=prefill,instance=0,tp=1,room=1003,effect=fail"
    job = mpijob.run(
        4,
        "rooms_worker.py",
        ["--pool", "torch", "--rooms", 8, "--fault", rule],
        env={"KVX_LAYOUT": "prefill:1x2,decode:1x2"},
    )
    lines = set()
    for r in job.results:
        assert r["states"]["1003"] == "FAILED", r
        others = {k: v for k, v in r["states"].items() if k != "1003"}
        assert set(others.values()) == {"SUCCESS"}, r
        assert r["bad"] == 0
        f = r["failures"]["1003"]
        assert f["room"] == 1003
        assert f["status"] == "ERR_INJECTED" and f["injected"]
        assert f["stage"] == "post"
        # world rank 1 is prefill[0].tp1
        assert f["origin"] == [1, "prefill", 0, 1], f
        assert f["line"].startswith("room 1003 FAILED at post on prefill[0].tp1 (rank 1): ")
        assert "[injected]" in f["line"]
        lines.add(f["line"].split(" (")[0] + f["sentence"])
    assert len(lines) == 1, lines


def test_verify_full_fails_a_corrupted_room_everywhere():
    # The decode flips a byte of room 1005 after it landed; verify="full"
    # (the Context parameter, not KVX_VERIFY) catches it on the decode rank.
    rule = "stage=verify,role=decode,room=1005,effect=corrupt"
    job = mpijob.run(
        2,
        "rooms_worker.py",
        ["--pool", "numpy", "--rooms", 8, "--fault", rule, "--verify", "full"],
        env={"KVX_LAYOUT": "prefill:1x1,decode:1x1"},
    )
    for r in job.results:
        assert r["states"]["1005"] == "FAILED", r
        others = {k: v for k, v in r["states"].items() if k != "1005"}
        assert set(others.values()) == {"SUCCESS"}, r
        f = r["failures"]["1005"]
        assert f["status"] == "ERR_CORRUPT" and f["stage"] == "verify", f
        assert f["origin"] == [1, "decode", 0, 0], f
        assert "from prefill[0].tp0 (rank 0)" in f["sentence"], f
        assert "match what was sent" in f["sentence"], f
    with pytest.raises(ValueError, match="verify="):
        kvx.Context(kv=kvx.KVLayout(layers=1, page_size=1, kv_heads=1, head_dim=1), verify="on")


def test_interleaved_pool_specs():
    # (kvx_ctx_create's own checks of a stride: mpi_tests/cases/stride_*.mpi)
    import torch

    job_free = [torch.zeros((8, 2, 4, 4, 8)) for _ in range(2)]
    spec = kvx.kv_interleaved(job_free)
    assert spec.page_stride == 2 * 4 * 4 * 8 * 4 and spec.num_pages == 8
    assert spec.buffers[1] - spec.buffers[0] == 4 * 4 * 8 * 4
    whole = torch.zeros((8, 3, 2, 4, 4, 8))
    spec = kvx.layers_interleaved(whole)
    assert spec.page_stride == 3 * 2 * 512 and len(spec.buffers) == 6
    with pytest.raises(ValueError):
        kvx.kv_interleaved([torch.zeros((8, 3, 4))])
