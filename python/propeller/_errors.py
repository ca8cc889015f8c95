"""The exceptions of the propeller package: one class per error code of the library.

Every error the C++ library reports is a ``Status`` with a code (common/status.h); the
extension raises it as ``_propeller.StatusError(code, code_name, message)`` and ``translated``
turns that into the class below, once, at the edge of the public API. Each class also derives
from the closest built-in exception, so ``except ValueError`` catches a bad query and ``except
LookupError`` a missing file.
"""

from __future__ import annotations

import builtins
import contextlib
import re
from typing import Dict, Iterator, Optional, Type

from . import _propeller

__all__ = [
    "Error", "NotFoundError", "InvalidArgumentError", "QueryError", "CorruptionError",
    "IOFailureError", "AlreadyExistsError", "NotSupportedError", "ResourceExhaustedError",
    "UnavailableError", "DeadlineExceededError", "PermissionDeniedError", "AbortedError",
    "InternalError", "ClosedError",
]


class Error(Exception):
    """Any error of Propeller.

    Attributes:
        code: the library's status code number (common/status.h), -1 for a closed client.
        code_name: its name, such as ``"not found"``.
        message: the library's one-line message (for a bad query: ``"error at 6: ..."``).
    """

    code: int = 12
    code_name: str = "internal"

    def __init__(self, message: str, *, code: Optional[int] = None,
                 code_name: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if code_name is not None:
            self.code_name = code_name

    def __str__(self) -> str:
        return f"{self.code_name}: {self.message}" if self.message else self.code_name


class NotFoundError(Error, LookupError):
    """The named file, index or volume does not exist (or is not indexed)."""
    code, code_name = 1, "not found"


class InvalidArgumentError(Error, ValueError):
    """The input is malformed: a path, a name, a sort key, an option."""
    code, code_name = 2, "invalid argument"


class QueryError(InvalidArgumentError):
    """A query the parser refused (docs/query.md).

    Attributes:
        position: the 1-based character position the parser names, or None.
    """

    position: Optional[int] = None


class CorruptionError(Error):
    """Stored or received bytes failed a check."""
    code, code_name = 3, "corruption"


class IOFailureError(Error, OSError):
    """The operating system refused a file operation (a path that cannot be stat'ed...)."""
    code, code_name = 4, "io error"


class AlreadyExistsError(Error):
    """Creating something that exists (an index of that name)."""
    code, code_name = 5, "already exists"


class NotSupportedError(Error):
    """A valid request the service cannot do."""
    code, code_name = 6, "not supported"


class ResourceExhaustedError(Error):
    """A limit was hit: a watch fell behind, too many watches, a full disk."""
    code, code_name = 7, "resource exhausted"


class UnavailableError(Error, ConnectionError):
    """The master, an index node or a mount is not answering (or the index is catching up)."""
    code, code_name = 8, "unavailable"


class DeadlineExceededError(Error, builtins.TimeoutError):
    """A request timed out (connect(timeout=...))."""
    code, code_name = 9, "timeout"


class PermissionDeniedError(Error, PermissionError):
    """Your credentials do not allow it (only root or the service's user changes the index)."""
    code, code_name = 10, "permission denied"


class AbortedError(Error):
    """Stopped on purpose: a node is stopping, a watch ended."""
    code, code_name = 11, "aborted"


class InternalError(Error):
    """An invariant of Propeller broke: a bug worth reporting."""
    code, code_name = 12, "internal"


class ClosedError(Error, ValueError):
    """The client (or the iterator) was used after close()."""
    code, code_name = -1, "closed"


_BY_CODE: Dict[int, Type[Error]] = {
    cls.code: cls
    for cls in (NotFoundError, InvalidArgumentError, CorruptionError, IOFailureError,
                AlreadyExistsError, NotSupportedError, ResourceExhaustedError,
                UnavailableError, DeadlineExceededError, PermissionDeniedError, AbortedError,
                InternalError, ClosedError)
}

# The query parser's messages (common/query/lexer.cc) start "error at N: ".
_QUERY_POSITION = re.compile(r"error at (\d+):")


def from_status(code: int, code_name: str, message: str, *, query: bool = False) -> Error:
    """The exception for a library status; ``query``: the call parsed a query."""
    cls: Type[Error] = _BY_CODE.get(code, Error)
    position = _QUERY_POSITION.search(message) if cls is InvalidArgumentError else None
    if query and position is not None:
        err: Error = QueryError(message, code=code, code_name=code_name)
        err.position = int(position.group(1))  # type: ignore[attr-defined]
        return err
    return cls(message, code=code, code_name=code_name)


@contextlib.contextmanager
def translated(*, query: bool = False) -> Iterator[None]:
    """Raises the public exception for a StatusError of the extension."""
    try:
        yield
    except _propeller.StatusError as e:
        code, code_name, message = e.args
        raise from_status(code, code_name, message, query=query) from None
