"""propeller: real-time file-metadata search from Python (docs/python.md).

    import propeller

    with propeller.connect() as client:            # the service `propeller` itself would use
        for rec in client.search("size>1m & ext=parquet", scope="/data", sort="size"):
            print(rec.path, rec.size, rec.mtime_datetime)
        client.set_attr("/data/run42/a.parquet", "project", "alpha")
        for event in client.watch("ext=log"):       # endless; Ctrl-C or close() ends it
            print(event.kind.value, event.path)

Errors are ``propeller.Error`` subclasses (``QueryError`` for a malformed query, with its
``position``; ``UnavailableError`` when the service does not answer; ...).
"""

from ._client import SORT_KEYS, Client, SearchResults, Watch, connect
from ._errors import (AbortedError, AlreadyExistsError, ClosedError, CorruptionError,
                      DeadlineExceededError, Error, InternalError, InvalidArgumentError,
                      IOFailureError, NotFoundError, NotSupportedError, PermissionDeniedError,
                      QueryError, ResourceExhaustedError, UnavailableError)
from ._types import (AttrValue, ClusterStatus, Event, EventKind, FileType, Index, IndexType,
                     NodeStatus, Record, Volume)

__version__ = "0.1.0"

__all__ = [
    "connect", "Client", "SearchResults", "Watch", "SORT_KEYS",
    "Record", "Event", "EventKind", "FileType", "Index", "IndexType", "Volume", "NodeStatus",
    "ClusterStatus", "AttrValue",
    "Error", "NotFoundError", "InvalidArgumentError", "QueryError", "CorruptionError",
    "IOFailureError", "AlreadyExistsError", "NotSupportedError", "ResourceExhaustedError",
    "UnavailableError", "DeadlineExceededError", "PermissionDeniedError", "AbortedError",
    "InternalError", "ClosedError",
]
