"""A real model end to end: a small torch transformer (tinymodel.py) whose
prefill instance's paged KV cache kvx moves to a decode instance that
generates from it. The tokens, and the logits within float tolerance, must
equal the same model run colocated, for prefill:decode TP 1->1, 2->1, 1->2
and 2->2, several prompts of different lengths in flight, scattered decode
pages. An injected failure fails its request on every rank with the
injected reason and origin while the others still match; a corrupted page
(the control) must change the output, or this test could not fail."""

import pytest

import mpijob

LAYOUTS = [
    ("prefill:1x1,decode:1x1", 2),
    ("prefill:1x2,decode:1x1", 3),
    ("prefill:1x1,decode:1x2", 3),
    ("prefill:1x2,decode:1x2", 4),
]
TOL = 1e-3


def run(layout, np_, *args):
    job = mpijob.run(np_, "model_worker.py", list(args), env={"KVX_LAYOUT": layout}, timeout=180)
    for r in job.results:
        print("rank %d (%s tp%d): %.2f s in the job" % (r["rank"], r["role"], r["tp"], r["seconds"]))
    return job


def check_matches(r, rooms):
    for room in rooms:
        c = r["compare"][room]
        assert c["tokens"] == c["ref_tokens"], (room, r["role"], c)
        assert c["max_logit_diff"] < TOL, (room, r["role"], c)


@pytest.mark.parametrize("layout,np_", LAYOUTS)
def test_model_matches_colocated(layout, np_):
    job = run(layout, np_, "--rooms", 6, "--steps", 8)
    for r in job.results:
        assert set(r["states"].values()) == {"SUCCESS"}, r
        check_matches(r, r["states"])
        if r["role"] == "decode":
            assert all(len(c["tokens"]) == 8 for c in r["compare"].values())


def test_model_injected_failure():
    rule = "stage=post,role=prefill,instance=0,tp=1,room=3003,effect=fail"
    job = run("prefill:1x2,decode:1x2", 4, "--rooms", 6, "--fault", rule)
    for r in job.results:
        assert r["states"]["3003"] == "FAILED", r
        f = r["failures"]["3003"]
        assert f["status"] == "ERR_INJECTED" and f["injected"] and f["stage"] == "post"
        assert f["origin"] == [1, "prefill", 0, 1], f
        assert f["line"].startswith("room 3003 FAILED at post on prefill[0].tp1 (rank 1): ")
        others = [room for room in r["states"] if room != "3003"]
        assert all(r["states"][room] == "SUCCESS" for room in others), r
        if r["role"] == "decode":
            assert "3003" not in r["compare"]
        check_matches(r, others)


def test_model_control_corrupted_page_changes_output():
    job = run("prefill:1x1,decode:1x1", 2, "--rooms", 6, "--corrupt", 3003)
    dec = [r for r in job.results if r["role"] == "decode"][0]
    c = dec["compare"]["3003"]
    assert c["max_logit_diff"] > 10 * TOL, c
    check_matches(dec, [room for room in dec["compare"] if room != "3003"])
