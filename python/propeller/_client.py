"""The Client: searches, watches, attributes, indexes and status of a Propeller service.

A thin layer over the extension (python/propeller_py.cc), which runs every library call with
the GIL released and each search or watch on a thread of its own, handing results over through a
bounded queue (python/result_stream.h): iterating a search holds a few thousand records at a
time, whatever the number of matches.
"""

from __future__ import annotations

import collections
import os
from typing import Callable, Deque, Generic, List, Optional, TypeVar, Union

from . import _propeller
from ._errors import (ClosedError, DeadlineExceededError, InvalidArgumentError, NotFoundError,
                      translated)
from ._types import (AttrValue, ClusterStatus, Event, EventKind, Index, IndexType, Record,
                     Volume)

__all__ = ["connect", "Client", "SearchResults", "Watch", "SORT_KEYS"]

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

# What Client.search(sort=...) accepts (common/record.h, CheckSortKey).
SORT_KEYS = ("size", "mtime", "ctime", "atime", "uid", "gid", "path", "name")

# Records converted to Python per trip into the extension: large enough to amortise taking the
# GIL back, small enough that a consumer that stops early wasted little.
_BATCH = 256

T = TypeVar("T")


def _absolute(path: PathLike) -> bytes:
    """An absolute path as bytes, without resolving symbolic links (lstat semantics)."""
    return os.path.abspath(os.fsencode(path))


def _scope(scope: Optional[PathLike]) -> Optional[bytes]:
    """A scope as `propeller search --scope` takes it (client/cli/output.cc, ScopeArgument): a
    directory that exists resolved as the volume roots were at import (symbolic links, ".."),
    one that does not taken as written, made absolute."""
    if scope is None:
        return None
    raw = os.fsencode(scope)
    try:
        return os.path.realpath(raw, strict=True)
    except OSError:
        return os.path.abspath(raw)


def connect(master: Optional[str] = None, *, mount: Optional[PathLike] = None,
            timeout: float = 5.0, cluster_key: Optional[PathLike] = None,
            curve_key: Optional[PathLike] = None, server_key: Optional[PathLike] = None,
            insecure: bool = False) -> "Client":
    """Connects to a Propeller service, as the `propeller` command does.

    Args:
        master: the master's endpoint (``ipc:///run/propeller/master.sock``,
            ``tcp://host:7470``). None: ``$PROPELLER_MASTER``, else the master of the Propeller
            mount the current directory is in, else a local ``propeller up`` (yours, then
            root's), else the one master every mount of this host uses, else
            ``tcp://127.0.0.1:7470``.
        mount: instead of ``master``: a path inside a Propeller mount, whose master is used.
        timeout: seconds each request may take.
        cluster_key, curve_key, server_key, insecure: security of ``tcp://`` endpoints
            (docs/security.md), as the CLI's --cluster-key, --curve-key, --server-key and
            --insecure.

    Nothing is contacted yet: the first call does (and raises UnavailableError if nothing
    answers). Raises InvalidArgumentError for bad options, NotFoundError when ``mount`` is not
    inside a Propeller mount or a key file is missing.
    """
    if master is not None and mount is not None:
        raise InvalidArgumentError("give master or mount, not both")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise InvalidArgumentError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if mount is not None:
        with translated():
            found = _propeller.master_of_mount(_absolute(mount))
        if found is None:
            raise NotFoundError(f"{os.fsdecode(mount)} is not inside a Propeller mount")
        master = found
    keys = [os.fsdecode(k) if k is not None else "" for k in (cluster_key, curve_key, server_key)]
    with translated():
        native = _propeller.Client(master or "", max(1, round(timeout * 1000)), keys[0], keys[1],
                                   keys[2], bool(insecure))
    return Client(native)


class _Stream(Generic[T]):
    """An iterator over a stream of the extension, converting each item with ``convert``."""

    def __init__(self, stream: "_propeller.Stream", convert: Callable[[object], T]) -> None:
        self._stream: Optional[_propeller.Stream] = stream
        self._convert = convert
        self._buffer: Deque[T] = collections.deque()

    def __iter__(self) -> "_Stream[T]":
        return self

    def __next__(self) -> T:
        while not self._buffer:
            if self._stream is None:
                raise StopIteration
            with translated(query=True):
                batch = self._stream.next_batch(_BATCH)
            if batch is None:
                self._stream = None
                raise StopIteration
            self._buffer.extend(map(self._convert, batch))
        return self._buffer.popleft()

    def close(self) -> None:
        """Stops the search or watch now (a watch: within about a second). Idempotent."""
        stream, self._stream = self._stream, None
        self._buffer.clear()
        if stream is not None:
            stream.close()

    def __enter__(self) -> "_Stream[T]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # The extension's stream stops its worker when collected anyway; this only makes it
        # happen as soon as the iterator goes.
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class SearchResults(_Stream[Record]):
    """The records of a search, as they arrive (``Client.search``).

    An iterator and a context manager: leaving the ``with`` block, ``close()``, or dropping
    the iterator stops the search. Errors of the search (an index node down, an unknown
    attribute) are raised by ``next()``.
    """


class Watch(_Stream[Event]):
    """The changes to a query's matches, as they happen (``Client.watch``); endless until
    closed, or until an error ends it (``ResourceExhaustedError`` when it fell behind,
    ``UnavailableError`` when a node or the mount stopped answering)."""

    def wait_ready(self, timeout: Optional[float] = None) -> bool:
        """Waits until every index node registered the watch: every change acknowledged after
        that is reported. True once it is, False after ``timeout`` seconds; raises if the watch
        ended first."""
        if self._stream is None:
            raise ClosedError("the watch is closed")
        with translated(query=True):
            return self._stream.wait_ready(timeout)


def _event(item: object) -> Event:
    kind, record = item  # type: ignore[misc]
    rec = Record._from_native(record)
    return Event(EventKind(kind), rec.path, rec)


class Client:
    """A connection to a Propeller service (``propeller.connect``).

    Every method may be called from several threads at once; each blocking call releases the
    GIL. A context manager: leaving the ``with`` block closes it. After ``close()`` every call
    raises ``ClosedError``, and open searches and watches end with it.
    """

    def __init__(self, native: "_propeller.Client") -> None:
        self._native = native

    # ---- lifetime ------------------------------------------------------------------------

    @property
    def master(self) -> str:
        """The master's endpoint this client talks to."""
        with translated():
            return self._native.master_endpoint

    @property
    def closed(self) -> bool:
        return self._native.closed

    def close(self) -> None:
        """Ends open searches and watches and releases the connection. Idempotent."""
        self._native.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self._native.master_endpoint
        return f"<propeller.Client {state}>"

    # ---- searching -----------------------------------------------------------------------

    def search(self, query: str, *, scope: Optional[PathLike] = None,
               sort: Optional[str] = None, descending: bool = False,
               limit: Optional[int] = None) -> SearchResults:
        """Finds the indexed files matching ``query`` (docs/query.md), streaming.

        Args:
            query: ``'size>1m & ext=parquet'``, ``'mtime<1d'``, ``'project=alpha'``...
            scope: only files under this directory (default: every indexed volume). A scope
                inside a Propeller mount is answered by that mount, with paths under it.
            sort: order by one of SORT_KEYS (results then arrive once every node answered).
            descending: with ``sort``, largest first.
            limit: at most this many records.

        Returns an iterator of ``Record``; only files your credentials let you find by
        walking the tree. Raises QueryError (with ``position``) for a malformed query,
        InvalidArgumentError for a bad sort key or limit, ClosedError after close();
        UnavailableError and others come from the iteration.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        if sort is not None and sort not in SORT_KEYS:
            raise InvalidArgumentError(f"sort must be one of {', '.join(SORT_KEYS)}, not {sort!r}")
        if descending and sort is None:
            raise InvalidArgumentError("descending needs sort")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)
                                  or limit < 1):
            raise InvalidArgumentError(f"limit must be a positive int or None, not {limit!r}")
        with translated(query=True):
            stream = self._native.search(query, _scope(scope), limit or 0, sort or "",
                                         bool(descending))
        return SearchResults(stream, Record._from_native)

    def count(self, query: str, *, scope: Optional[PathLike] = None) -> int:
        """The number of files ``search(query, scope=scope)`` returns."""
        with self.search(query, scope=scope) as results:
            return sum(1 for _ in results)

    def watch(self, query: str, *, scope: Optional[PathLike] = None,
              max_queued: Optional[int] = None, wait: bool = True,
              timeout: Optional[float] = None) -> Watch:
        """Watches the matches of ``query``: an endless iterator of ``Event``.

        Ages in the query are measured from the moment the watch starts. With ``wait`` (the
        default), returns once every index node registered the watch, so every change made
        after this call returns is reported (``timeout``: seconds to wait for that, then
        DeadlineExceededError). ``max_queued``: changes each node may hold while you are busy
        (default 10,000); past it the watch ends with ResourceExhaustedError. Closing the
        watch or the client stops it; so does Ctrl-C in the loop that reads it.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        if max_queued is not None and (not isinstance(max_queued, int) or max_queued < 1):
            raise InvalidArgumentError(f"max_queued must be a positive int, not {max_queued!r}")
        with translated(query=True):
            stream = self._native.watch(query, _scope(scope), max_queued or 0)
        w = Watch(stream, _event)
        if wait and not w.wait_ready(timeout):
            w.close()
            raise DeadlineExceededError(f"the watch was not registered within {timeout} s")
        return w

    # ---- one file ------------------------------------------------------------------------

    def get(self, path: PathLike) -> Record:
        """The index's record of the file at ``path`` (not following a final symlink).

        ``path`` may be inside a Propeller mount or an indexed volume; the record's ``path``
        is ``path`` made absolute. Raises NotFoundError when the file is not indexed or not in
        any volume, IOFailureError when it cannot be stat'ed.
        """
        with translated():
            return Record._from_native(self._native.get(_absolute(path)))

    def set_attr(self, path: PathLike, name: str, value: AttrValue) -> None:
        """Sets user attribute ``name`` of the file at ``path`` (int, float or str value).

        Searchable as ``name=value`` at once; an index of that name (``create_index``) makes it
        fast. Only root or the service's user may change the index (PermissionDeniedError).
        """
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        target = _absolute(path)
        with translated():
            if isinstance(value, bool):
                raise TypeError("a bool is not an attribute value: use 0/1 or a str")
            if isinstance(value, int):
                if not -2**63 <= value < 2**63:
                    raise InvalidArgumentError(f"{value} does not fit in 64 bits")
                self._native.set_attr_int(target, name, value)
            elif isinstance(value, float):
                self._native.set_attr_float(target, name, value)
            elif isinstance(value, str):
                self._native.set_attr_str(target, name, value)
            else:
                raise TypeError(f"an attribute value is an int, float or str, not "
                                f"{type(value).__name__}")

    def remove_attr(self, path: PathLike, name: str) -> None:
        """Removes user attribute ``name`` of the file at ``path`` (no error if it has none)."""
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        with translated():
            self._native.remove_attr(_absolute(path), name)

    # ---- indexes, volumes, status --------------------------------------------------------

    def create_index(self, name: str, type: Union[IndexType, str] = IndexType.BTREE) -> None:
        """Creates user-defined index ``name`` (btree: ranges and prefixes; hash: equality),
        built on every index node. Raises AlreadyExistsError, InvalidArgumentError for a bad
        name or type."""
        kind = IndexType(type).value if isinstance(type, IndexType) else str(type)
        with translated():
            self._native.create_index(name, kind)

    def drop_index(self, name: str) -> None:
        """Drops user-defined index ``name`` (NotFoundError if there is none)."""
        with translated():
            self._native.drop_index(name)

    def indexes(self) -> List[Index]:
        """The user-defined indexes (the built-in ones are not listed)."""
        with translated():
            return [Index(name, IndexType(kind)) for name, kind in self._native.indexes()]

    def volumes(self) -> List[Volume]:
        """The indexed directory trees."""
        with translated():
            return [Volume(vid, root) for vid, root in self._native.volumes()]

    def status(self) -> ClusterStatus:
        """The master's view plus each index node's own report (an unreachable node is
        reported in its NodeStatus.error, not raised)."""
        with translated():
            return ClusterStatus._from_native(self._native.status())

