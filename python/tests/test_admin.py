"""Attributes, indexes, status, connecting and errors through the Python package."""

from __future__ import annotations

import os

import pytest

import propeller


@pytest.fixture(scope="module")
def file(service):
    path = os.path.join(service.mnt, "admin", "run42", "a.parquet")
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(b"z" * 4096)
    return path


def test_attributes_round_trip(client, service, file):
    client.set_attr(file, "project", "alpha")
    client.set_attr(file, "run", 42)
    client.set_attr(file, "score", 0.5)
    rec = client.get(file)
    assert dict(rec.attrs) == {"project": "alpha", "run": 42, "score": 0.5}
    assert isinstance(rec.attrs["run"], int) and isinstance(rec.attrs["score"], float)
    scope = os.path.join(service.mnt, "admin")
    assert [r.path for r in client.search("project=alpha & run>=42", scope=scope)] == [file]
    (hit,) = client.search("project=alpha", scope=scope)
    assert hit.attrs["project"] == "alpha"
    client.remove_attr(file, "project")
    assert "project" not in client.get(file).attrs
    assert list(client.search("project=alpha", scope=scope)) == []
    # The backing path names the same file.
    backing = os.path.join(service.backing, os.path.relpath(file, service.mnt))
    assert client.get(backing).attrs["run"] == 42


def test_attribute_values_are_checked(client, file):
    with pytest.raises(TypeError):
        client.set_attr(file, "flag", True)
    with pytest.raises(TypeError):
        client.set_attr(file, "list", [1])  # type: ignore[arg-type]
    with pytest.raises(propeller.InvalidArgumentError):
        client.set_attr(file, "huge", 2**70)
    with pytest.raises(propeller.InvalidArgumentError):
        client.set_attr(file, "Bad Name", 1)
    with pytest.raises(propeller.InvalidArgumentError):
        client.set_attr(file, "size", 1)  # built in
    with pytest.raises(propeller.IOFailureError):
        client.set_attr(file + ".missing", "project", "x")


def test_indexes_create_list_drop(client):
    client.create_index("pyproj", propeller.IndexType.HASH)
    client.create_index("pyrange")  # btree
    listed = {i.name: i.type for i in client.indexes()}
    assert listed["pyproj"] is propeller.IndexType.HASH
    assert listed["pyrange"] is propeller.IndexType.BTREE
    assert {"pyproj", "pyrange"} <= {i.name for i in client.status().indexes}
    with pytest.raises(propeller.AlreadyExistsError):
        client.create_index("pyproj", "hash")
    with pytest.raises(propeller.InvalidArgumentError):
        client.create_index("pyother", "bogus")
    client.drop_index("pyproj")
    client.drop_index("pyrange")
    assert not {"pyproj", "pyrange"} & {i.name for i in client.indexes()}
    with pytest.raises(propeller.NotFoundError):
        client.drop_index("pyproj")


def test_status_counts(client, service, file):
    status = client.status()
    assert isinstance(status, propeller.ClusterStatus)
    assert status.master == service.master
    (node,) = status.nodes
    assert node.up and node.error == "" and node.cached_updates is not None
    walked = sum(len(dirs) + len(files) for _, dirs, files in os.walk(service.backing)) + 1
    assert status.files >= walked  # every entry of the tree (its root too), maybe more
    assert any(v.root == service.backing for v in status.volumes)


def test_connect_finds_the_service(service, monkeypatch):
    with propeller.connect(mount=service.mnt) as c:
        assert c.master == service.master
    monkeypatch.setenv("PROPELLER_MASTER", service.master)
    with propeller.connect() as c:
        assert c.master == service.master
        assert c.status().master == service.master
    with pytest.raises(propeller.NotFoundError):
        propeller.connect(mount="/proc")
    with pytest.raises(propeller.InvalidArgumentError):
        propeller.connect(service.master, mount=service.mnt)
    with pytest.raises(propeller.InvalidArgumentError):
        propeller.connect(service.master, timeout=0)


def test_unreachable_master_is_unavailable(service):
    with propeller.connect(f"ipc://{service.root}/nobody.sock", timeout=0.5) as c:
        with pytest.raises(propeller.UnavailableError) as e:
            c.status()
        assert isinstance(e.value, ConnectionError)
        with pytest.raises(propeller.UnavailableError):
            list(c.search("size>0"))


def test_bad_input_raises_clear_errors(client, service):
    with pytest.raises(propeller.QueryError) as e:
        client.search("size>>1m")
    assert e.value.position == 6 and "error at 6" in str(e.value)
    assert isinstance(e.value, ValueError)
    with pytest.raises(propeller.QueryError):
        client.watch("name=(")
    with pytest.raises(propeller.QueryError) as e:  # only the index node knows: on next()
        list(client.search("sise>1m", scope=service.mnt))
    assert "did you mean size" in str(e.value)
    with pytest.raises(propeller.InvalidArgumentError):
        client.search("size>0", sort="colour")
    with pytest.raises(propeller.InvalidArgumentError):
        client.search("size>0", descending=True)
    with pytest.raises(propeller.InvalidArgumentError):
        client.search("size>0", limit=0)
    with pytest.raises(TypeError):
        client.search(b"size>0")  # type: ignore[arg-type]


def test_closed_client(service):
    c = propeller.connect(service.master)
    it = c.search("type=f")
    c.close()
    c.close()
    assert c.closed
    with pytest.raises(propeller.ClosedError):
        c.indexes()
    with pytest.raises(propeller.ClosedError):
        c.search("size>0")
    try:  # finished before the close, or ended by it
        list(it)
    except propeller.AbortedError:
        pass
