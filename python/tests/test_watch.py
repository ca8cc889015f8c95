"""Watches through the Python package: events of files changed after the watch started,
stopping by close(), by the client's close and by Ctrl-C."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
import time

import pytest

import propeller

NEXT_TIMEOUT_S = 20


def next_within(watch, timeout=NEXT_TIMEOUT_S):
    """next(watch), failing the test (not hanging it) after `timeout` seconds."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(next, watch)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            watch.close()
            pytest.fail(f"no watch event within {timeout} s")


@pytest.fixture()
def top(service, request):
    path = os.path.join(service.mnt, "watch", request.node.name)
    os.makedirs(path)
    return path


def events_until(watch, done):
    """The events up to and including the first for which done(event) holds."""
    events = []
    while not events or not done(events[-1]):
        events.append(next_within(watch))
    return events


def test_events_of_a_file_created_after_the_watch(client, top):
    with client.watch("ext=csv", scope=top) as w:
        path = os.path.join(top, "new.csv")
        with open(path, "wb") as f:  # the create is one change, the close another
            f.write(b"1,2\n")
        events = events_until(w, lambda e: e.record.size == 4)
        assert events[0].kind is propeller.EventKind.ADDED
        assert all(e.path == path and e.record.path == path for e in events)
        assert all(e.kind is propeller.EventKind.CHANGED for e in events[1:])
        with open(path, "ab") as f:
            f.write(b"3,4\n")
        events = events_until(w, lambda e: e.record.size == 8)
        assert all(e.kind is propeller.EventKind.CHANGED and e.path == path for e in events)
        os.rename(path, path + ".old")  # stops matching
        e = next_within(w)
        assert e.kind is propeller.EventKind.REMOVED and e.path == path
        assert isinstance(e.record, propeller.Record)


def test_closing_the_watch_or_client_stops_it(service, top):
    c = propeller.connect(service.master)
    w = c.watch("type=f", scope=top)
    start = time.monotonic()
    w.close()
    assert time.monotonic() - start < 5
    assert list(w) == []
    w = c.watch("type=f", scope=top)
    reader_error = []

    def read():
        try:
            for _ in w:
                pass
        except propeller.Error as e:
            reader_error.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.3)
    c.close()
    reader.join(10)
    assert not reader.is_alive()
    assert [type(e) for e in reader_error] in ([], [propeller.AbortedError])


def test_ctrl_c_interrupts_a_blocked_watch(client, top):
    w = client.watch("type=f", scope=top)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        next(w)
    assert time.monotonic() - start < 5
    w.close()


def test_abandoned_watch_ends(client, top):
    before = len(os.listdir("/proc/self/task"))
    w = client.watch("type=f", scope=top)
    del w
    deadline = time.monotonic() + 10
    while len(os.listdir("/proc/self/task")) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(os.listdir("/proc/self/task")) <= before
