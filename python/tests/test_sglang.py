"""kvx.sglang over 4 ranks (prefill TP 2, decode TP 2), driven as sglang's
schedulers drive a backend: byte-exact pages and metadata rows; poll()
agreed over TP so that sglang's MIN all-reduce never changes a value; an
injected failure raised by failure_exception() as KVTransferError naming
its origin on every rank."""

import mpijob

from kvx import sglang as kvs
import kvx


def test_kvpoll_numbers_are_sglangs():
    assert (kvs.KVPoll.Failed, kvs.KVPoll.Bootstrapping, kvs.KVPoll.WaitingForInput,
            kvs.KVPoll.Transferring, kvs.KVPoll.Success) == (0, 1, 2, 3, 4)
    assert kvs.KVPoll.Success == kvx.State.SUCCESS


def run(*args):
    return mpijob.run(4, "sglang_worker.py", list(args),
                      env={"KVX_LAYOUT": "prefill:1x2,decode:1x2"}, timeout=120)


def test_sglang_backend_transfers():
    job = run("--requests", 10)
    for r in job.results:
        assert set(r["final"].values()) == {kvs.KVPoll.Success}, r
        assert r["bad"] == 0, r
        assert r["not_noop"] == 0, r
        if r["role"] == "prefill":
            assert all(b and b > 0 for b in r["metrics"].values()), r


def test_sglang_backend_failure_names_origin():
    job = run("--requests", 8, "--fault", "stage=post,role=prefill,instance=0,tp=1,room=5003,effect=fail")
    for r in job.results:
        assert r["final"]["5003"] == kvs.KVPoll.Failed, r
        assert all(s == kvs.KVPoll.Success for room, s in r["final"].items() if room != "5003"), r
        e = r["reasons"]["5003"]
        assert e["room"] == 5003
        assert e["text"].startswith(
            "KVTransferError(bootstrap_room=5003): room 5003 FAILED at post on prefill[0].tp1 (rank 1): "), e
        assert "unknown reason" not in e["text"]
        assert e["origin"] == [1, "prefill", 0, 1]
        assert r["bad"] == 0 and r["not_noop"] == 0, r


def test_provider_answers_every_class_type():
    import enum

    class KVClassType(enum.Enum):  # sglang's, by value
        KVARGS = "kvargs"
        MANAGER = "manager"
        SENDER = "sender"
        RECEIVER = "receiver"
        BOOTSTRAP_SERVER = "bootstrap_server"

    got = [kvs.Provider().get_kv_class(t) for t in KVClassType]
    assert got == [kvs.KVArgs, kvs.KVManager, kvs.KVSender, kvs.KVReceiver, kvs.KVBootstrapServer]
