"""Grading for classes too large for one machine: jobs on a Dask cluster, a PostgreSQL gradebook.

`.ci/run` starts a Dask scheduler and worker and a PostgreSQL server on loopback and passes
their addresses in COPY_THAT_TEST_SCHEDULER and COPY_THAT_TEST_PG_URL.  Without the scheduler
variable the test starts its own scheduler and worker; without a PostgreSQL URL the PostgreSQL
test is skipped with that reason, except under CI, where it fails.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from autograder.grading.runner import Grader
from harness import SANDBOX, free_port, scratch_course, stop, submission, submit


WRONG = {"shares_memory": "def shares_memory(a, b):\n    return a is b\n"}
EXPECTED = {"reference": 13.0, "blank": 0.0, "wrong": 10.0}



@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    address = os.environ.get("COPY_THAT_TEST_SCHEDULER")
    if address:
        yield address
        return
    port = free_port()
    bindir = Path(sys.executable).parent
    workdir = tmp_path_factory.mktemp("dask")
    logs = open(workdir / "dask.log", "w")
    procs = [subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], cwd=workdir, stdout=logs, stderr=logs)]
    address = f"tcp://127.0.0.1:{port}"
    procs.append(subprocess.Popen([str(bindir / "dask"), "worker", address, "--nthreads", "2", "--nworkers", "1",
                                   "--host", "127.0.0.1", "--no-dashboard"], cwd=workdir, stdout=logs, stderr=logs))
    try:
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)
        yield address
    finally:
        for p in reversed(procs):
            stop(p)
        logs.close()


def _submit_three(root: Path) -> None:
    submit(root, "a1_views", "reference", submission("a1_views"))
    submit(root, "a1_views", "blank", submission("a1_views", blank=True))
    submit(root, "a1_views", "wrong", submission("a1_views", WRONG))


def _check(results) -> None:
    got = {r.student: r.score for r in results}
    assert got == EXPECTED, [(r.student, r.score, r.problems) for r in results]
    assert all(r.graded and not r.flags for r in results), results


@SANDBOX
def test_grading_on_a_dask_cluster(tmp_path, scheduler):
    root = scratch_course(tmp_path / "course", "a1_views")
    _submit_three(root)
    results = Grader(root, "a1_views", scheduler=scheduler, log=lambda m: None).run()
    _check(results)
    assert (root / "autograded" / "reference" / "a1_views" / "a1_views.ipynb").exists()


def test_gradebook_in_postgresql(tmp_path):
    url = os.environ.get("COPY_THAT_TEST_PG_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("COPY_THAT_TEST_PG_URL is not set: .ci/run starts PostgreSQL and sets it")
        pytest.skip("no PostgreSQL server: set COPY_THAT_TEST_PG_URL (as .ci/run does) to run this test")
    import psycopg2
    from sqlalchemy.engine import make_url

    admin = make_url(url)
    name = f"copythat_{uuid.uuid4().hex[:10]}"
    conn = psycopg2.connect(host=admin.host, port=admin.port, user=admin.username, password=admin.password,
                            dbname=admin.database)
    conn.autocommit = True
    conn.cursor().execute(f"CREATE DATABASE {name}")
    try:
        # SQLAlchemy 2.1 picks psycopg 3 for plain postgresql://; the course pins psycopg2
        db_url = admin.set(drivername="postgresql+psycopg2", database=name).render_as_string(hide_password=False)
        root = scratch_course(tmp_path / "course", "a1_views", db_url=db_url)
        assert not (root / "gradebook.db").exists(), "the gradebook lives in PostgreSQL"
        _submit_three(root)
        _check(Grader(root, "a1_views", jobs=2, log=lambda m: None).run())
        from nbgrader.api import Gradebook

        with Gradebook(db_url) as gb:
            assert gb.find_submission("a1_views", "reference").score == 13.0
    finally:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.close()
