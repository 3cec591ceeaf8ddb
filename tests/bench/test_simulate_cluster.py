"""cardbench simulate --cluster: the shoes dealt by the workers of a real Dask distributed scheduler
(a local cluster of worker processes) give the lines and figures --jobs gives for the same seed; a
cluster that does not answer is one line."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import distributed
from click.testing import CliRunner

from cardd.bench.program import cardbench
from tests.bench.test_simulate import figures

CARDBENCH = str(Path(sys.executable).with_name("cardbench"))


def simulate(*options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CARDBENCH, "simulate", *options], capture_output=True, text=True, timeout=300)


def test_a_cluster_deals_what_jobs_deal(tmp_path: Path) -> None:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        runs = {}
        for name, how in (("jobs", ["--jobs", "2"]), ("cluster", ["--cluster", address])):
            out = tmp_path / f"{name}.jsonl"
            done = simulate("--rounds", "700", "--boxes", "2", "--seed", "9", "--out", str(out), *how)
            assert done.returncode == 0, done.stderr
            runs[name] = (out.read_bytes(), figures(done.stdout))
        with distributed.Client(address) as client:
            # each worker process dealt some of the shoes
            dealt = client.run(lambda dask_worker: dask_worker.state.executed_count)
    assert runs["cluster"] == runs["jobs"] and runs["jobs"][0].count(b"\n") == 700
    assert len(dealt) == 2 and all(count > 0 for count in dealt.values()), dealt


def test_a_cluster_that_does_not_answer_is_one_line() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = simulate("--rounds", "50", "--cluster", f"tcp://127.0.0.1:{port}")
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"Error: --cluster tcp://127.0.0.1:{port}: "
                                                                    "no Dask scheduler answered"), done.stderr


def test_cluster_goes_with_neither_jobs_nor_the_pty_transport_and_takes_only_an_address() -> None:
    assert "--cluster ADDRESS" in CliRunner().invoke(cardbench, ["simulate", "-h"]).output
    for other in (["--jobs", "2"], ["--transport", "pty"]):
        result = CliRunner().invoke(cardbench, ["simulate", "--cluster", "tcp://127.0.0.1:1", *other])
        assert result.exit_code == 2 and "--cluster with" in result.output
    for wrong in ("foo", "127.0.0.1:8786", "tcp://sched.lab", "http://sched.lab:8787/status"):
        result = CliRunner().invoke(cardbench, ["simulate", "--cluster", wrong])
        assert result.exit_code == 2 and result.output.endswith(
            f"Error: --cluster {wrong!r}: not a scheduler's address: expected tcp://HOST:PORT (or tls://), "
            "as dask scheduler prints it\n"), result.output
