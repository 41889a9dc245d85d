"""Suite runs forked from a warm process: the mutants' and real bugs' runs without paying
for ``import torch`` each time.

About 150 runs of a suite selection, each with one deviation installed by a ``-p`` plugin,
prove the suite (tests/test_mutation.py, tests/test_realbugs.py). As fresh interpreters
each spends about 5 s of CPU, more than half of it importing torch, pytest and the
project. Here one server process per calling thread imports them once, without running
an op (so no thread pool exists to break across ``fork``), and forks a child per run:
the child sets the run's environment, calls ``pytest.main`` and exits with its code.
A run's own modules (the ``-p`` plugin, the test files) are imported in the child only,
so nothing it installs outlives it.

Only runs whose environment changes nothing the warm process has imported may come here
(the deviation plugins read their variable at import, in the child). Besides pytest, a
module of ``tests/`` with a ``main()`` may run there (the real bugs' witnesses).
``python -m helpers.warm`` is the server; :func:`run` is the client.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from reference_impl.engine.torch_registry import all_op_names

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
_LOCAL = threading.local()
_SERVERS: list[subprocess.Popen[str]] = []


@atexit.register
def _stop_servers() -> None:
    """End of stdin ends a server once its child is done."""
    for server in _SERVERS:
        if server.stdin is not None:
            server.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=30)


def run(
    args: Sequence[str], env_extra: Mapping[str, str], timeout: float, module: str = "pytest"
) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>`` from the repository root, forked from this thread's server
    (``pytest``, or a module of ``tests/`` whose ``main()`` returns the exit code)."""
    server = getattr(_LOCAL, "server", None)
    if server is None or server.poll() is not None:
        server = _LOCAL.server = subprocess.Popen(
            [sys.executable, "-m", "helpers.warm"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), str(ROOT)) if p)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        _SERVERS.append(server)
    assert server.stdin is not None and server.stdout is not None
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        request = {"args": list(args), "env": dict(env_extra), "timeout": timeout, "module": module}
        request |= {"out": str(out), "err": str(err)}
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        line = server.stdout.readline()
        if not line:
            raise RuntimeError(f"the warm suite server (python -m helpers.warm) died: exit {server.wait()}")
        code = json.loads(line)["returncode"]
        cmd = [sys.executable, "-m", module, *args]
        return subprocess.CompletedProcess(cmd, code, _read(out), _read(err))


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def _child(request: dict) -> None:
    """In the forked child: the run's environment, its output files, then pytest."""
    fd_out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    fd_err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd_out, 1)
    os.dup2(fd_err, 2)
    code = 3
    try:
        os.environ.update(request["env"])
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:0] = [p for p in extra if p not in sys.path]
        os.chdir(ROOT)
        all_op_names.cache_clear()  # the server's operator set: a run's plugin may define operators
        if request["module"] == "pytest":
            import pytest

            # the project's modules are imported already, so pytest cannot rewrite their asserts
            code = int(pytest.main([*request["args"], "-W", "ignore::pytest.PytestAssertRewriteWarning"]))
        else:
            sys.argv = [request["module"], *request["args"]]
            code = int(importlib.import_module(request["module"]).main())
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return -9
        time.sleep(0.05)


def serve() -> None:
    """Import once, then fork one child per request line on stdin; answer its exit code.
    The compile stack (AOTAutograd, inductor), which the suite imports only in a compiled mode's
    run, is imported here once: importing it starts no thread."""
    import hypothesis.stateful  # noqa: F401
    import pytest  # noqa: F401
    import torch._functorch.aot_autograd
    import torch._inductor.compile_fx
    import torch._inductor.config
    import torch._meta_registrations  # noqa: F401

    import conformance.collection
    import conformance.plugin  # noqa: F401
    from reference_impl.spectools.installed_spec import load_installed_spec

    load_installed_spec()  # the bundled spec's documents, validated once for every child
    # what is imported now is never garbage: a child's collections (pytest runs several as it
    # ends) then skip it, and do not write to its pages (each write copies a page of the parent)
    gc.freeze()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        code = _wait(pid, float(request["timeout"]))
        sys.stdout.write(json.dumps({"returncode": code}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
