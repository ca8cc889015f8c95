"""Helpers of the Python package's tests: file trees made through the mount, and the oracle
the searches are checked against (os.walk and os.lstat of the backing tree)."""

from __future__ import annotations

import os
import stat
from typing import Dict, Iterable, Tuple

# name -> size; the names include a space, a multi-byte UTF-8 name and bytes that are not
# UTF-8, which Python shows as surrogates (os.fsdecode).
TREE: Dict[bytes, int] = {
    b"a.txt": 10,
    b"b.bin": 5000,
    b"sub/c.log": 123456,
    b"sub/deeper/d.parquet": 2048,
    b"sub/with space.txt": 1,
    "sub/caf\u00e9.txt".encode(): 77,
    b"sub/raw-\xff\xfe.dat": 300,
    b"empty": 0,
}


def make_tree(top: str, tree: Dict[bytes, int] = TREE) -> None:
    """Creates `tree` under `top` (a directory in the mount), through the mount."""
    base = os.fsencode(top)
    for rel, size in tree.items():
        path = os.path.join(base, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"x" * size)


def oracle(backing_top: str, shown_top: str) -> Dict[str, os.stat_result]:
    """Every regular file under `backing_top`, by the path a search shows it under
    (`shown_top` + the same relative path), with its lstat."""
    out: Dict[str, os.stat_result] = {}
    base = os.fsencode(backing_top)
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                rel = os.path.relpath(path, base)
                out[os.fsdecode(os.path.join(os.fsencode(shown_top), rel))] = st
    return out


def by_path(records: Iterable) -> Dict[str, object]:
    out = {}
    for r in records:
        assert r.path not in out, f"{r.path!r} reported twice"
        out[r.path] = r
    return out


def mapped(service, path: str) -> Tuple[str, str]:
    """(backing path, mount path) of a path relative to the tree's top."""
    return os.path.join(service.backing, path), os.path.join(service.mnt, path)
