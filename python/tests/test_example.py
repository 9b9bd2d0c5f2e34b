"""examples/python/engine.py, as kvx-run would start it (KVX_LAYOUT, 4 ranks),
with and without an injected failure."""

import os

import mpijob

ENGINE = os.path.join(os.environ.get("top_srcdir") or os.path.join(mpijob.HERE, "..", ".."),
                      "examples", "python", "engine.py")


def test_engine_example():
    job = mpijob.run(4, os.path.abspath(ENGINE), env={"KVX_LAYOUT": "prefill:1x2,decode:1x2"},
                     reports=False)
    for who in ("prefill[0].tp0", "prefill[0].tp1", "decode[0].tp0", "decode[0].tp1"):
        assert "%s: 32 of 32 rooms SUCCESS" % who in job.output, job.output


def test_engine_example_injected_failure():
    job = mpijob.run(4, os.path.abspath(ENGINE), reports=False, env={
        "KVX_LAYOUT": "prefill:1x2,decode:1x2",
        "KVX_FAULT": "stage=post,role=prefill,tp=1,room=7,effect=fail"})
    for who in ("prefill[0].tp0", "prefill[0].tp1", "decode[0].tp0", "decode[0].tp1"):
        assert "%s: 31 of 32 rooms SUCCESS" % who in job.output, job.output
    reasons = [line for line in job.output.splitlines()
               if line.startswith("  room 7 FAILED at post on prefill[0].tp1 (rank 1): injected")]
    assert len(reasons) == 4, job.output
