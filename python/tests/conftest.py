"""Fixtures of the Python package's tests: a real `propeller up` and a real `propeller mount`
connected to it, in a fresh temporary directory, both stopped (and the mount unmounted) at the
end of the session whatever happened.

The CLI binary is named by $PROPELLER_CLI (CTest sets it: python/CMakeLists.txt); the package
is imported from $PYTHONPATH (the build tree's python/ directory). The mount needs /dev/fuse
and root (as the C++ mount tests: tests/mount_harness.h).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Iterator, List

import pytest

import propeller

READY_TIMEOUT_S = 30.0


@dataclass
class Service:
    cli: str
    root: str     # the temporary directory holding everything
    master: str   # ipc:// endpoint of `propeller up`
    backing: str  # the mount's backing tree (its volume's root)
    mnt: str      # the mount point


def _cli() -> str:
    cli = os.environ.get("PROPELLER_CLI", "")
    if not cli or not os.access(cli, os.X_OK):
        pytest.exit("PROPELLER_CLI must name the built propeller binary "
                    "(ctest -R python_test sets it)", returncode=2)
    return cli


def _die_with_parent() -> None:
    # If pytest itself is killed (a CTest timeout sends SIGKILL; no finalizer runs), the
    # daemons get SIGTERM: the mount then unmounts itself and `up` stops.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _start(argv: List[str], log: str, ready: str) -> subprocess.Popen:
    """Starts a daemon, its output to `log`; returns once it wrote its ready file."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            with open(log, errors="replace") as f:
                text = f.read()
            _stop(proc)
            raise RuntimeError(f"{' '.join(argv)} did not start; its log:\n{text}")
        time.sleep(0.02)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _unmount(mnt: str) -> None:
    for cmd in (["fusermount3", "-u", mnt], ["umount", "-l", mnt]):
        if subprocess.run(cmd, stderr=subprocess.DEVNULL).returncode == 0:
            return


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("the mount tests need /dev/fuse and root")
    cli = _cli()
    # Short: unix socket paths are limited to 107 bytes.
    root = tempfile.mkdtemp(prefix="propeller-py-")
    os.chmod(root, 0o755)
    svc = Service(cli, root, f"ipc://{root}/master.sock", f"{root}/backing", f"{root}/mnt")
    os.makedirs(svc.backing)
    os.makedirs(svc.mnt)
    procs: List[subprocess.Popen] = []
    mounted = False
    try:
        procs.append(_start([cli, "up", "--data", f"{root}/data", "--listen", svc.master,
                             "--node-listen", f"ipc://{root}/node.sock", "--ready-file",
                             f"{root}/up.ready", "--log-level", "warning"],
                            f"{root}/up.log", f"{root}/up.ready"))
        procs.append(_start([cli, "--master", svc.master, "mount", svc.backing, svc.mnt,
                             "--data", f"{root}/mount-data", "--ready-file",
                             f"{root}/mount.ready", "--log-level", "warning"],
                            f"{root}/mount.log", f"{root}/mount.ready"))
        mounted = True
        yield svc
    finally:
        if mounted:
            _unmount(svc.mnt)
        for proc in reversed(procs):
            _stop(proc)
        if os.environ.get("PROPELLER_KEEP_TEST_DIRS") is None:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def client(service: Service) -> Iterator[propeller.Client]:
    with propeller.connect(service.master) as c:
        yield c
