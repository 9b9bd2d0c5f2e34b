"""Runs a Python worker as a real MPI job from pytest, through the build's
mpi_tests/run-mpi.sh: the same private TMPDIR and shared-memory directories,
--allow-run-as-root/--oversubscribe, timeout and reaping of strays as every
C multi-rank case. Workers print one line "KVXRESULT <json>" each; run()
returns them by world rank."""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def build_dir():
    """The build directory: $top_builddir under make check, else the one the
    imported kvx package lives in (build/python/kvx)."""
    top = os.environ.get("top_builddir")
    if top:
        return os.path.abspath(top)
    import kvx

    return os.path.abspath(os.path.join(os.path.dirname(kvx.__file__), "..", ".."))


class Job:
    def __init__(self, rc, output, results):
        self.rc = rc
        self.output = output
        self.results = results

    def by_rank(self):
        return {r["rank"]: r for r in self.results}


def run(np, worker, args=(), env=None, timeout=120, expect_exit=0, reports=True):
    """Runs HERE/worker on np ranks; returns a Job. Fails the calling test
    (AssertionError with the output's tail) when mpirun does not exit with
    expect_exit within timeout seconds, or (reports) when a rank did not
    print its KVXRESULT line. worker: a path relative to python/tests, or
    absolute."""
    runner = os.path.join(build_dir(), "mpi_tests", "run-mpi.sh")
    env = dict(env or {})
    lines = ["np %d" % np, "timeout %d" % timeout]
    for key, value in env.items():
        if any(c.isspace() for c in value):
            raise ValueError("run-mpi.sh env values cannot hold blanks: %s=%r" % (key, value))
        lines.append("env %s=%s" % (key, value))
    cmd = [sys.executable, "-u", os.path.join(HERE, worker)] + [str(a) for a in args]
    lines.append("run " + " ".join(cmd))
    lines.append("expect-exit %d" % expect_exit)
    with tempfile.NamedTemporaryFile("w", suffix=".mpi", prefix="pytest-", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        case = f.name
    try:
        proc = subprocess.run(
            ["sh", runner, case],
            cwd=build_dir(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout + 60,
        )
    finally:
        os.unlink(case)
    out = proc.stdout.decode(errors="replace")
    results = []
    for line in out.splitlines():
        if line.startswith("KVXRESULT "):
            results.append(json.loads(line[len("KVXRESULT "):]))
    assert proc.returncode == 0, "job failed (run-mpi.sh exited %d):\n%s" % (
        proc.returncode,
        out[-6000:],
    )
    assert not reports or len(results) == np, "%d of %d ranks reported:\n%s" % (len(results), np, out[-6000:])
    return Job(proc.returncode, out, results)
