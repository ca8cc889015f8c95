// propeller._propeller: the C++ half of the Python package (python/README.md). A thin layer over
// the C++ Client (client/lib/propeller.h) that the pure-Python package (python/propeller/) wraps
// into its public, typed API; nothing here is public.
//
// Conventions of this layer, which python/propeller/_client.py relies on:
//  - every non-OK Status raises StatusError(code, code_name, message), code being the
//    StatusCode number (common/status.h), or kClosedCode for a closed client; the Python side
//    maps them to its exception classes (python/propeller/_errors.py), once;
//  - paths come in as bytes (os.fsencode) and go out as str decoded as os.fsdecode does (the
//    file system encoding with surrogateescape), so every path survives the round trip;
//  - records are plain tuples in the order of RecordTuple below (python/propeller/_types.py,
//    Record._from_native);
//  - every call into the library releases the GIL; only the calling thread holds Python objects.
//
// Threading: a Client may be used from several Python threads at once (the C++ Client is
// thread-safe; its pointer is read and reset only with the GIL held).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/lib/mount_registry.h"
#include "client/lib/propeller.h"
#include "common/query/query.h"
#include "common/record.h"
#include "common/status.h"
#include "python/result_stream.h"

namespace py = pybind11;

namespace propeller::python {
namespace {

// StatusError's code for a client (or stream) used after close(): not a StatusCode.
constexpr int kClosedCode = -1;

PyObject* g_status_error = nullptr;  // created once at import, never freed (module lifetime)

// Text from the library: UTF-8 where it is, the other bytes kept as lone surrogates, so a
// message naming an odd path neither fails to convert nor loses the bytes.
py::str Text(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()),
                                     "surrogateescape");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// A path as os.fsdecode gives it.
py::str PathText(const std::string& s) {
  PyObject* o = PyUnicode_DecodeFSDefaultAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

[[noreturn]] void Raise(int code, const char* name, const std::string& message) {
  py::tuple args = py::make_tuple(code, name, Text(message));
  PyErr_SetObject(g_status_error, args.ptr());
  throw py::error_already_set();
}

[[noreturn]] void Raise(const Status& status) {
  Raise(static_cast<int>(status.code()), StatusCodeName(status.code()), status.message());
}

void Check(const Status& status) {
  if (!status.ok()) Raise(status);
}

// Exact nanoseconds: Python ints have no 64-bit limit, and file times may exceed it.
py::int_ TimeInt(FileTime t) {
  if (t >= INT64_MIN && t <= INT64_MAX) return py::int_(static_cast<int64_t>(t));
  const std::string text = FileTimeToString(t);
  PyObject* o = PyLong_FromString(text.c_str(), nullptr, 10);
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::int_>(o);
}

py::object AttrObject(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return py::int_(*i);
  if (const auto* d = std::get_if<double>(&v)) return py::float_(*d);
  return Text(std::get<std::string>(v));
}

// (path, volume, inode, type, size, mtime_ns, ctime_ns, atime_ns, uid, gid, mode, nlink,
//  attrs, links): links are the record's in-volume paths, one per hard link.
py::tuple RecordTuple(const std::string& path, const FileRecord& r) {
  py::dict attrs;
  for (const auto& [name, value] : r.attrs) attrs[Text(name)] = AttrObject(value);
  py::tuple links(r.paths.size());
  for (size_t i = 0; i < r.paths.size(); ++i) links[i] = PathText(r.paths[i]);
  return py::make_tuple(PathText(path), r.id.volume, r.id.ino,
                        std::string(1, static_cast<char>(r.type)), r.size, TimeInt(r.mtime),
                        TimeInt(r.ctime), TimeInt(r.atime), r.uid, r.gid, r.mode, r.nlink,
                        std::move(attrs), std::move(links));
}

// The path the index knows a file by: a path inside a Propeller mount is that of the same
// file in the mount's backing tree (the mount's volume is registered by its backing root).
std::string IndexedPath(const std::string& path) {
  Result<std::optional<MountRecord>> mount = FindMountFor(path);
  if (!mount.ok() || !*mount) return path;
  const MountRecord& m = **mount;
  return m.backing + path.substr(m.mountpoint.size());
}

// The library parses a query on the stream's worker; parsed here too, a malformed one is
// raised by search() and watch() themselves, with the parser's position, rather than by the
// first next(). (Unknown attribute names are only known to the index nodes: those still come
// from the iteration.)
Status CheckQuery(const std::string& query) {
  Result<Query> parsed = Query::Parse(query);
  return parsed.status();
}

// Waits on a stream in slices, so that Ctrl-C (or any signal handler that raises) interrupts a
// Python thread blocked on a watch with nothing to report.
constexpr std::chrono::milliseconds kSignalCheckEvery{100};

class Stream {
 public:
  explicit Stream(std::shared_ptr<ResultStream> s, bool events)
      : stream_(std::move(s)), events_(events) {}
  // An abandoned iterator (garbage-collected) stops its worker like close(), without holding
  // the GIL while it waits.
  ~Stream() { Close(); }
  Stream(Stream&&) = default;
  Stream& operator=(Stream&&) = delete;

  // Up to `max` items (records, or (kind, record) for a watch); None at the end.
  py::object NextBatch(size_t max) {
    if (!stream_) Raise(kClosedCode, "closed", "the stream is closed");
    // Our own reference: another thread may close() this stream while we wait unlocked.
    const std::shared_ptr<ResultStream> stream = stream_;
    std::vector<StreamItem> items;
    Status status;
    for (;;) {
      ResultStream::Outcome outcome;
      {
        py::gil_scoped_release unlocked;
        outcome = stream->Next(max == 0 ? 1 : max, kSignalCheckEvery, &items, &status);
      }
      if (outcome == ResultStream::Outcome::kItems) break;
      if (outcome == ResultStream::Outcome::kEnded) {
        Close();
        Check(status);
        return py::none();
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
    py::list out;
    for (const StreamItem& item : items) {
      py::tuple record = RecordTuple(item.path, item.record);
      if (events_) {
        out.append(py::make_tuple(std::string(1, item.kind), std::move(record)));
      } else {
        out.append(std::move(record));
      }
    }
    return out;
  }

  // True once the watch is registered on every index node; False after `timeout_s` (None:
  // no limit). Raises when the watch ended first.
  bool WaitReady(std::optional<double> timeout_s) {
    if (!stream_) Raise(kClosedCode, "closed", "the stream is closed");
    const std::shared_ptr<ResultStream> stream = stream_;  // as in NextBatch
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      Status status;
      ResultStream::Outcome outcome;
      {
        py::gil_scoped_release unlocked;
        outcome = stream->WaitReady(kSignalCheckEvery, &status);
      }
      if (outcome == ResultStream::Outcome::kItems) return true;
      if (outcome == ResultStream::Outcome::kEnded) {
        Close();
        Check(status);
        Raise(static_cast<int>(StatusCode::kAborted), "aborted", "the watch ended");
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (timeout_s && std::chrono::steady_clock::now() - start >=
                           std::chrono::duration<double>(*timeout_s)) {
        return false;
      }
    }
  }

  // Stops the worker and waits for it (a watch: up to its next idle tick, about a second). A
  // thread iterating meanwhile sees the end of the stream.
  void Close() {
    if (!stream_) return;
    std::shared_ptr<ResultStream> s = std::move(stream_);
    py::gil_scoped_release unlocked;
    s->Cancel(Status::OK());
    s->Join();
  }

  bool closed() const { return !stream_; }

 private:
  std::shared_ptr<ResultStream> stream_;  // null once closed
  bool events_;
};

class PyClient {
 public:
  PyClient(const std::string& master, int64_t timeout_ms, const std::string& cluster_key,
           const std::string& curve_key, const std::string& server_key, bool insecure) {
    ClientOptions o;
    o.master_endpoint = master;  // "" = DefaultMasterEndpoint(), as the CLI
    o.timeout_ms = timeout_ms;
    o.cluster_key_file = cluster_key;
    o.curve_key_file = curve_key;
    o.server_key_file = server_key;
    o.insecure = insecure;
    Result<std::unique_ptr<Client>> c = Status::Internal("not connected");
    {
      py::gil_scoped_release unlocked;
      c = Client::Connect(o);
    }
    Check(c.status());
    client_ = std::shared_ptr<Client>(std::move(*c).release());
  }

  std::string master_endpoint() { return Live()->master_endpoint(); }
  bool closed() const { return !client_; }

  // Cancels the client's streams (their next read raises "closed") and lets the C++ client go
  // once the last stream's worker returned.
  void Close() {
    for (const std::weak_ptr<ResultStream>& w : streams_) {
      if (std::shared_ptr<ResultStream> s = w.lock()) {
        s->Cancel(Status(StatusCode::kAborted, "the client was closed"));
      }
    }
    streams_.clear();
    std::shared_ptr<Client> last = std::move(client_);
    py::gil_scoped_release unlocked;  // the destructor flushes queued forgets
    last.reset();
  }

  Stream Search(const std::string& query, std::optional<std::string> scope, size_t limit,
                const std::string& sort_by, bool descending) {
    Check(CheckQuery(query));
    Check(CheckSortKey(sort_by));
    ClientSearchOptions o;
    if (scope) o.scope = *scope;
    o.limit = limit;
    o.sort_by = sort_by;
    o.descending = descending;
    return Track(ResultStream::StartSearch(Live(), query, std::move(o)), false);
  }

  Stream Watch(const std::string& query, std::optional<std::string> scope, size_t max_queued) {
    Check(CheckQuery(query));
    ClientWatchOptions o;
    if (scope) o.scope = *scope;
    o.max_queued = max_queued;
    return Track(ResultStream::StartWatch(Live(), query, std::move(o)), true);
  }

  py::tuple Get(const std::string& path) {
    std::shared_ptr<Client> c = Live();
    Result<FileRecord> record = Status::Internal("not asked");
    {
      py::gil_scoped_release unlocked;
      Result<FileId> id = c->FileIdOf(IndexedPath(path));
      record = id.ok() ? c->Get(*id) : Result<FileRecord>(id.status());
    }
    Check(record.status());
    return RecordTuple(path, *record);
  }

  void SetAttr(const std::string& path, const std::string& name, const AttrValue& value) {
    std::shared_ptr<Client> c = Live();
    Status st;
    {
      py::gil_scoped_release unlocked;
      Result<FileId> id = c->FileIdOf(IndexedPath(path));
      st = id.ok() ? c->SetAttr(*id, name, value) : id.status();
    }
    Check(st);
  }

  void RemoveAttr(const std::string& path, const std::string& name) {
    std::shared_ptr<Client> c = Live();
    Status st;
    {
      py::gil_scoped_release unlocked;
      Result<FileId> id = c->FileIdOf(IndexedPath(path));
      st = id.ok() ? c->RemoveAttr(*id, name) : id.status();
    }
    Check(st);
  }

  void CreateIndex(const std::string& name, const std::string& type) {
    Result<IndexType> t = ParseIndexType(type);
    Check(t.status());
    std::shared_ptr<Client> c = Live();
    Status st;
    {
      py::gil_scoped_release unlocked;
      st = c->CreateIndex(name, *t);
    }
    Check(st);
  }

  void DropIndex(const std::string& name) {
    std::shared_ptr<Client> c = Live();
    Status st;
    {
      py::gil_scoped_release unlocked;
      st = c->DropIndex(name);
    }
    Check(st);
  }

  py::list Indexes() {
    std::shared_ptr<Client> c = Live();
    Result<std::vector<wire::IndexDef>> list = Status::Internal("not asked");
    {
      py::gil_scoped_release unlocked;
      list = c->ListIndexes();
    }
    Check(list.status());
    py::list out;
    for (const wire::IndexDef& d : *list) out.append(py::make_tuple(Text(d.name), IndexTypeName(d.type)));
    return out;
  }

  py::list Volumes() {
    std::shared_ptr<Client> c = Live();
    Result<std::vector<wire::VolumeInfo>> list = Status::Internal("not asked");
    {
      py::gil_scoped_release unlocked;
      list = c->ListVolumes();
    }
    Check(list.status());
    return VolumeList(*list);
  }

  // (master, acgs, files, nodes, indexes, volumes); a node is (id, endpoint, up, acgs, files,
  // free_disk_bytes, load, last_heartbeat_ns, detail or None, error) with detail
  // (cached_updates, wal_bytes, disk_bytes, index_memory_bytes, commit_error,
  // failing_since_ns, damaged_acgs).
  py::tuple GetStatus() {
    std::shared_ptr<Client> c = Live();
    Result<ClusterStatus> status = Status::Internal("not asked");
    {
      py::gil_scoped_release unlocked;
      status = c->GetStatus();
    }
    Check(status.status());
    py::list nodes;
    for (const NodeStatus& n : status->nodes) {
      py::object detail = py::none();
      if (n.node) {
        py::list damaged;
        for (const std::string& d : n.node->damaged_acgs) damaged.append(Text(d));
        detail = py::make_tuple(n.node->cached_updates, n.node->wal_bytes, n.node->disk_bytes,
                                n.node->index_memory_bytes, Text(n.node->commit_error),
                                n.node->failing_since_ns, std::move(damaged));
      }
      nodes.append(py::make_tuple(n.info.node_id, Text(n.info.endpoint), n.info.up, n.info.acgs,
                                  n.info.files, n.info.free_disk_bytes, n.info.load,
                                  n.info.last_heartbeat_ns, std::move(detail), Text(n.error)));
    }
    py::list indexes;
    for (const wire::IndexDef& d : status->indexes) {
      indexes.append(py::make_tuple(Text(d.name), IndexTypeName(d.type)));
    }
    return py::make_tuple(Text(status->master_endpoint), status->acgs, status->files,
                          std::move(nodes), std::move(indexes), VolumeList(status->volumes));
  }

 private:
  std::shared_ptr<Client> Live() {
    if (!client_) Raise(kClosedCode, "closed", "the client is closed");
    return client_;
  }

  Stream Track(std::unique_ptr<ResultStream> s, bool events) {
    std::shared_ptr<ResultStream> shared(std::move(s));
    std::erase_if(streams_, [](const std::weak_ptr<ResultStream>& w) { return w.expired(); });
    streams_.push_back(shared);
    return Stream(std::move(shared), events);
  }

  static py::list VolumeList(const std::vector<wire::VolumeInfo>& volumes) {
    py::list out;
    for (const wire::VolumeInfo& v : volumes) out.append(py::make_tuple(v.volume, PathText(v.root)));
    return out;
  }

  std::shared_ptr<Client> client_;  // null once closed; the streams' workers share it
  std::vector<std::weak_ptr<ResultStream>> streams_;  // to cancel at Close
};

// The master of the Propeller mount holding `path` (absolute), or None outside every mount.
py::object MasterOfMount(const std::string& path) {
  Result<std::optional<MountRecord>> mount = Status::Internal("not asked");
  {
    py::gil_scoped_release unlocked;
    mount = FindMountFor(path);
  }
  Check(mount.status());
  if (!*mount || (*mount)->master_endpoint.empty()) return py::none();
  return Text((*mount)->master_endpoint);
}

std::string DefaultMaster() {
  py::gil_scoped_release unlocked;
  return DefaultMasterEndpoint();
}

}  // namespace
}  // namespace propeller::python

PYBIND11_MODULE(_propeller, m) {
  using namespace propeller::python;
  m.doc() = "The C++ half of the propeller package; use `import propeller` instead.";
  g_status_error = PyErr_NewException("propeller._propeller.StatusError", nullptr, nullptr);
  if (g_status_error == nullptr) throw py::error_already_set();
  m.add_object("StatusError", py::handle(g_status_error));  // the module keeps a reference too
  m.attr("CLOSED_CODE") = kClosedCode;
  m.def("master_of_mount", &MasterOfMount, py::arg("path"));
  m.def("default_master", &DefaultMaster);

  py::class_<Stream>(m, "Stream")
      .def("next_batch", &Stream::NextBatch, py::arg("max"))
      .def("wait_ready", &Stream::WaitReady, py::arg("timeout_s"))
      .def("close", &Stream::Close)
      .def_property_readonly("closed", &Stream::closed);

  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::string&, int64_t, const std::string&, const std::string&,
                    const std::string&, bool>(),
           py::arg("master"), py::arg("timeout_ms"), py::arg("cluster_key"),
           py::arg("curve_key"), py::arg("server_key"), py::arg("insecure"))
      .def_property_readonly("master_endpoint", &PyClient::master_endpoint)
      .def_property_readonly("closed", &PyClient::closed)
      .def("close", &PyClient::Close)
      .def("search", &PyClient::Search, py::arg("query"), py::arg("scope"), py::arg("limit"),
           py::arg("sort_by"), py::arg("descending"))
      .def("watch", &PyClient::Watch, py::arg("query"), py::arg("scope"),
           py::arg("max_queued"))
      .def("get", &PyClient::Get, py::arg("path"))
      .def("set_attr_int",
           [](PyClient& c, const std::string& path, const std::string& name, int64_t v) {
             c.SetAttr(path, name, propeller::AttrValue(v));
           })
      .def("set_attr_float",
           [](PyClient& c, const std::string& path, const std::string& name, double v) {
             c.SetAttr(path, name, propeller::AttrValue(v));
           })
      .def("set_attr_str",
           [](PyClient& c, const std::string& path, const std::string& name,
              const std::string& v) { c.SetAttr(path, name, propeller::AttrValue(v)); })
      .def("remove_attr", &PyClient::RemoveAttr, py::arg("path"), py::arg("name"))
      .def("create_index", &PyClient::CreateIndex, py::arg("name"), py::arg("type"))
      .def("drop_index", &PyClient::DropIndex, py::arg("name"))
      .def("indexes", &PyClient::Indexes)
      .def("volumes", &PyClient::Volumes)
      .def("status", &PyClient::GetStatus);
}
