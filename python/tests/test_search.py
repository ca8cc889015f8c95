"""Searches through the Python package against the file system as the oracle."""

from __future__ import annotations

import gc
import os
import threading
import time

import pytest

import propeller
from helpers import TREE, by_path, make_tree, oracle


@pytest.fixture(scope="module")
def tree(service):
    """The test tree, made through the mount; (backing top, mount top)."""
    make_tree(os.path.join(service.mnt, "search"))
    return os.path.join(service.backing, "search"), os.path.join(service.mnt, "search")


def check_records(found, expected):
    assert sorted(found) == sorted(expected)
    for path, st in expected.items():
        r = found[path]
        assert isinstance(r, propeller.Record)
        assert r.type is propeller.FileType.REGULAR
        assert r.size == st.st_size, path
        assert r.mtime_ns == st.st_mtime_ns, path
        assert r.ctime_ns == st.st_ctime_ns, path
        assert r.mode == st.st_mode and r.permissions == st.st_mode & 0o7777, path
        assert (r.uid, r.gid, r.nlink) == (st.st_uid, st.st_gid, st.st_nlink), path
        assert r.inode == st.st_ino, path
        assert abs(r.mtime - st.st_mtime) < 1e-6
        assert r.mtime_datetime.timestamp() == pytest.approx(st.st_mtime, abs=1e-5)


def test_search_in_the_mount_matches_the_tree(client, tree):
    backing, mnt = tree
    expected = oracle(backing, mnt)
    assert len(expected) == len(TREE)
    check_records(by_path(client.search("type=f", scope=mnt)), expected)


def test_search_without_scope_shows_volume_paths(client, service, tree):
    backing, _ = tree
    volumes = {v.root for v in client.volumes()}
    assert service.backing in volumes
    expected = oracle(backing, backing)
    found = by_path(r for r in client.search("type=f") if r.path.startswith(backing + "/"))
    check_records(found, expected)
    # A path that is not UTF-8 survives: the exact bytes come back with os.fsencode.
    raw = [p for p in found if os.fsencode(p).endswith(b"raw-\xff\xfe.dat")]
    assert len(raw) == 1 and os.path.exists(os.fsencode(raw[0]))


def test_predicates_sort_and_limit(client, tree):
    backing, mnt = tree
    expected = oracle(backing, mnt)
    big = {p for p, st in expected.items() if st.st_size > 1000}
    assert {r.path for r in client.search("type=f & size>1000", scope=mnt)} == big
    assert {r.path for r in client.search("type=f & ext=txt", scope=mnt)} == {
        p for p in expected if p.endswith(".txt")}
    by_size = sorted(expected, key=lambda p: expected[p].st_size, reverse=True)
    top = [r.path for r in client.search("type=f", scope=mnt, sort="size", descending=True,
                                         limit=3)]
    assert top == by_size[:3]
    assert len(list(client.search("type=f", scope=mnt, limit=2))) == 2
    assert client.count("type=f", scope=mnt) == len(expected)


def test_get_matches_lstat(client, tree):
    backing, mnt = tree
    path = os.path.join(mnt, "sub/c.log")
    r = client.get(path)
    st = os.lstat(os.path.join(backing, "sub/c.log"))
    assert r.path == path and r.size == st.st_size == 123456 and r.mtime_ns == st.st_mtime_ns
    assert r.links == ("/search/sub/c.log",)
    with pytest.raises(propeller.IOFailureError):
        client.get(os.path.join(mnt, "no-such-file"))
    with pytest.raises(propeller.NotFoundError):
        client.get("/proc/self/status")  # in no indexed volume


def native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def settle(baseline: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while native_threads() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    return native_threads()


def test_abandoned_iterator_stops_without_hanging_or_leaking(client, service):
    top = os.path.join(service.mnt, "many")
    os.makedirs(top)
    for i in range(600):
        with open(os.path.join(top, f"f{i:04}"), "wb") as f:
            f.write(b"y")
    list(client.search("type=f", scope=top, limit=1))  # the client's own threads start
    baseline = native_threads()
    for _ in range(20):
        it = client.search("type=f", scope=top)
        assert next(it).path.startswith(top + "/")
        del it  # abandoned half-way
        gc.collect()
    assert settle(baseline) <= baseline
    with client.search("type=f", scope=top) as it:
        next(it)
    assert settle(baseline) <= baseline
    it = client.search("type=f", scope=top)
    next(it)
    it.close()
    assert list(it) == []
    # A search can be iterated from another thread while this one closes it.
    it = client.search("type=f", scope=top)
    got = []
    reader = threading.Thread(target=lambda: got.extend(it))
    reader.start()
    it.close()
    reader.join(10)
    assert not reader.is_alive()
    assert settle(baseline) <= baseline


def test_many_searches_in_parallel_threads(client, tree):
    backing, mnt = tree
    expected = set(oracle(backing, mnt))
    results = []

    def run():
        results.append({r.path for r in client.search("type=f", scope=mnt)})

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [expected] * 8
