"""The values the propeller package returns: records, watch events, indexes, status.

All are frozen dataclasses built from the extension's tuples (python/propeller_py.cc,
RecordTuple and PyClient::GetStatus document their order).

Times are kept exact, as ``os.stat_result`` does: ``mtime_ns`` (an int of nanoseconds since
the Unix epoch, negative before 1970, of any magnitude) and ``mtime`` (float seconds, for
``time``/``datetime``); ``Record.mtime_datetime`` gives an aware UTC ``datetime``.
"""

from __future__ import annotations

import datetime as _dt
import enum
import stat as _stat
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Tuple, Union

__all__ = [
    "FileType", "IndexType", "EventKind", "Record", "Event", "Index", "Volume", "NodeStatus",
    "ClusterStatus", "AttrValue",
]

AttrValue = Union[int, float, str]


class FileType(str, enum.Enum):
    """A record's file type, as the query language's ``type=`` names it."""
    REGULAR = "f"
    DIRECTORY = "d"
    SYMLINK = "l"
    OTHER = "o"  # fifo, socket, device


class IndexType(str, enum.Enum):
    """A user-defined index's structure (docs/query.md)."""
    BTREE = "btree"    # ranges and prefixes
    HASH = "hash"      # equality
    KDTREE = "kdtree"


class EventKind(str, enum.Enum):
    """What a watch event reports (docs/cli.md, `propeller watch`)."""
    ADDED = "+"    # the path started matching: created, renamed here, changed to match
    REMOVED = "-"  # it stopped matching: deleted, renamed away, changed not to match
    CHANGED = "~"  # it matches and its file changed


def _datetime(ns: int) -> _dt.datetime:
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return epoch + _dt.timedelta(microseconds=ns // 1000)


@dataclass(frozen=True)
class Record:
    """One indexed file, as a search, a watch or ``Client.get`` returns it.

    ``path`` is the host path of this hit (each hard link is a hit of its own); under a
    mount's scope, the path under the mount point. Paths are ``str`` as ``os.fsdecode`` makes
    them: bytes that are not UTF-8 survive as surrogates (``os.fsencode(path)`` gives the
    exact bytes back). ``mode`` holds the type and permission bits as ``st_mode`` does.
    ``links`` are the file's paths inside its volume, one per hard link, sorted.
    """

    path: str
    volume: int
    inode: int
    type: FileType
    size: int
    mtime_ns: int
    ctime_ns: int
    atime_ns: int
    uid: int
    gid: int
    mode: int
    nlink: int
    attrs: Mapping[str, AttrValue] = field(default_factory=dict, hash=False)
    links: Tuple[str, ...] = ()

    @classmethod
    def _from_native(cls, t: Tuple[Any, ...]) -> "Record":
        return cls(t[0], t[1], t[2], FileType(t[3]), *t[4:12], attrs=t[12],
                   links=tuple(t[13]))

    @property
    def mtime(self) -> float:
        """Modification time in seconds since the epoch (``mtime_ns`` is exact)."""
        return self.mtime_ns / 1e9

    @property
    def ctime(self) -> float:
        """Status-change time in seconds since the epoch."""
        return self.ctime_ns / 1e9

    @property
    def atime(self) -> float:
        """Access time in seconds since the epoch."""
        return self.atime_ns / 1e9

    @property
    def mtime_datetime(self) -> _dt.datetime:
        """``mtime`` as an aware UTC datetime (microseconds; OverflowError past year 9999)."""
        return _datetime(self.mtime_ns)

    @property
    def permissions(self) -> int:
        """The permission bits of ``mode`` (``0o644``)."""
        return _stat.S_IMODE(self.mode)

    @property
    def is_dir(self) -> bool:
        return self.type is FileType.DIRECTORY


@dataclass(frozen=True)
class Event:
    """One change of a watch's matches, in the order its index node applied them."""

    kind: EventKind
    path: str
    record: Record  # after the change (REMOVED: before it)


@dataclass(frozen=True)
class Index:
    """A user-defined index, fed by the user attribute of the same name."""

    name: str
    type: IndexType


@dataclass(frozen=True)
class Volume:
    """An indexed directory tree: its id and its root on the host."""

    id: int
    root: str


@dataclass(frozen=True)
class NodeStatus:
    """An index node as the master sees it, plus its own report when it answered.

    The fields from ``cached_updates`` on are None when the node did not answer; ``error``
    then says why.
    """

    id: int
    endpoint: str
    up: bool
    acgs: int
    files: int
    free_disk_bytes: int
    load: float
    last_heartbeat_ns: int
    cached_updates: Optional[int] = None
    wal_bytes: Optional[int] = None
    disk_bytes: Optional[int] = None
    index_memory_bytes: Optional[int] = None
    commit_error: str = ""        # why its commits fail ("" while they succeed)
    failing_since_ns: int = 0
    damaged_acgs: Tuple[str, ...] = ()
    error: str = ""

    @classmethod
    def _from_native(cls, t: Tuple[Any, ...]) -> "NodeStatus":
        detail = t[8]
        extra = {}
        if detail is not None:
            extra = dict(cached_updates=detail[0], wal_bytes=detail[1], disk_bytes=detail[2],
                         index_memory_bytes=detail[3], commit_error=detail[4],
                         failing_since_ns=detail[5], damaged_acgs=tuple(detail[6]))
        return cls(*t[:8], error=t[9], **extra)


@dataclass(frozen=True)
class ClusterStatus:
    """The master's view: files and partitions (ACGs), index nodes, volumes, indexes."""

    master: str
    acgs: int
    files: int
    nodes: Tuple[NodeStatus, ...]
    indexes: Tuple[Index, ...]
    volumes: Tuple[Volume, ...]

    @classmethod
    def _from_native(cls, t: Tuple[Any, ...]) -> "ClusterStatus":
        return cls(t[0], t[1], t[2], tuple(NodeStatus._from_native(n) for n in t[3]),
                   tuple(Index(name, IndexType(kind)) for name, kind in t[4]),
                   tuple(Volume(vid, root) for vid, root in t[5]))
