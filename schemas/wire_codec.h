// Building blocks of the wire codecs (messages.cc, watch_messages.cc): the msgpack writer, one
// Put (encode) and one Get (decode) per wire type, and the struct helpers that implement the
// compatibility rule of messages.h. Internal to schemas/: other layers use messages.h.
#ifndef PROPELLER_SCHEMAS_WIRE_CODEC_H_
#define PROPELLER_SCHEMAS_WIRE_CODEC_H_

#include <msgpack.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schemas/messages.h"
#include "schemas/msgpack_util.h"
#include "schemas/watch_messages.h"

namespace propeller::wire::codec {


using msgpack_util::GetI64;
using msgpack_util::GetU32;
using msgpack_util::GetU64;
using msgpack_util::Packer;
using msgpack_util::StringSink;

// Deepest nesting today is 6 (ApplyRequest / SearchHitsChunk: body, list, element, record,
// attrs, attr pair); the slack leaves room for appended fields that nest a little.
constexpr size_t kMaxDepth = 16;

// The encoder's state: the packer for ints and strings, and the string itself for float64
// and nested records (the packer holds no buffer, so both keep their order).
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out), sink_(out), pk_(sink_) {}
  Packer& pk() { return pk_; }
  std::string* out() { return out_; }

 private:
  std::string* out_;
  StringSink sink_;
  Packer pk_;
};

// ---- declarations: one Put (encode) and one Get (decode) per wire type --------------------
// Declared up front so the templates below find every overload (ADL does not look into this
// namespace). A Get writes into a default-constructed value and returns Corruption
// with a message such as "field 'files' is not a uint64" (the top level adds the struct name).

void Put(Writer& w, bool v);
void Put(Writer& w, uint32_t v);
void Put(Writer& w, uint64_t v);
void Put(Writer& w, int64_t v);
void Put(Writer& w, double v);
void Put(Writer& w, const std::string& v);
void Put(Writer& w, IndexType v);
void Put(Writer& w, const FileId& v);
void Put(Writer& w, const FileRecord& v);
void Put(Writer& w, const Update& v);
template <typename T>
void Put(Writer& w, const std::vector<T>& v);
template <typename T>
void Put(Writer& w, const std::optional<T>& v);

Status Get(const msgpack::object& o, bool* v);
Status Get(const msgpack::object& o, uint32_t* v);
Status Get(const msgpack::object& o, uint64_t* v);
Status Get(const msgpack::object& o, int64_t* v);
Status Get(const msgpack::object& o, double* v);
Status Get(const msgpack::object& o, std::string* v);
Status Get(const msgpack::object& o, IndexType* v);
Status Get(const msgpack::object& o, FileId* v);
Status Get(const msgpack::object& o, FileRecord* v);
Status Get(const msgpack::object& o, Update* v);
template <typename T>
Status Get(const msgpack::object& o, std::vector<T>* v);
template <typename T>
Status Get(const msgpack::object& o, std::optional<T>* v);

#define PROPELLER_WIRE_CODEC(T)           \
  void Put(Writer& w, const T& m);        \
  Status Get(const msgpack::object& o, T* m);
PROPELLER_WIRE_CODEC(Empty)
PROPELLER_WIRE_CODEC(RegisterNodeRequest)
PROPELLER_WIRE_CODEC(RegisterNodeReply)
PROPELLER_WIRE_CODEC(AcgLoad)
PROPELLER_WIRE_CODEC(HeartbeatRequest)
PROPELLER_WIRE_CODEC(IndexDef)
PROPELLER_WIRE_CODEC(AcgMerge)
PROPELLER_WIRE_CODEC(HeartbeatReply)
PROPELLER_WIRE_CODEC(NodeInfo)
PROPELLER_WIRE_CODEC(NodesReply)
PROPELLER_WIRE_CODEC(FilesRequest)
PROPELLER_WIRE_CODEC(AssignItem)
PROPELLER_WIRE_CODEC(AssignFilesRequest)
PROPELLER_WIRE_CODEC(FileLocation)
PROPELLER_WIRE_CODEC(LocationsReply)
PROPELLER_WIRE_CODEC(AcgLocation)
PROPELLER_WIRE_CODEC(LocateAcgsRequest)
PROPELLER_WIRE_CODEC(AcgLocationsReply)
PROPELLER_WIRE_CODEC(NewAcgRequest)
PROPELLER_WIRE_CODEC(NewAcgReply)
PROPELLER_WIRE_CODEC(SplitDoneRequest)
PROPELLER_WIRE_CODEC(SplitDoneReply)
PROPELLER_WIRE_CODEC(IndexName)
PROPELLER_WIRE_CODEC(IndexesReply)
PROPELLER_WIRE_CODEC(RegisterVolumeRequest)
PROPELLER_WIRE_CODEC(VolumeInfo)
PROPELLER_WIRE_CODEC(VolumesReply)
PROPELLER_WIRE_CODEC(ClusterStatusReply)
PROPELLER_WIRE_CODEC(ApplyRequest)
PROPELLER_WIRE_CODEC(WireCredentials)
PROPELLER_WIRE_CODEC(SearchQuery)
PROPELLER_WIRE_CODEC(WireHit)
PROPELLER_WIRE_CODEC(SearchHitsChunk)
PROPELLER_WIRE_CODEC(SearchDone)
PROPELLER_WIRE_CODEC(GetRecordRequest)
PROPELLER_WIRE_CODEC(RecordReply)
PROPELLER_WIRE_CODEC(NodeStatusReply)
PROPELLER_WIRE_CODEC(MountStatusReply)
PROPELLER_WIRE_CODEC(Ping)
PROPELLER_WIRE_CODEC(ListEdgesRequest)
PROPELLER_WIRE_CODEC(WireEdge)
PROPELLER_WIRE_CODEC(EdgesReply)
PROPELLER_WIRE_CODEC(MoveAcgRequest)
PROPELLER_WIRE_CODEC(MigrateAcgRequest)
PROPELLER_WIRE_CODEC(MigrateAcgReply)
PROPELLER_WIRE_CODEC(AdoptAcgChunk)
PROPELLER_WIRE_CODEC(ReleaseAcgRequest)
PROPELLER_WIRE_CODEC(WatchRequest)
PROPELLER_WIRE_CODEC(WatchEvent)
PROPELLER_WIRE_CODEC(WatchEventsChunk)
#undef PROPELLER_WIRE_CODEC

// ---- building blocks ------------------------------------------------------------------------

inline Status Wrong(const char* expected) {
  return Status::Corruption(std::string("is not ") + expected);
}

// A struct: the array of its fields in order.
template <typename... T>
void PutFields(Writer& w, const T&... fields) {
  w.pk().pack_array(static_cast<uint32_t>(sizeof...(T)));
  (Put(w, fields), ...);
}

// Reads a struct's array into `fields` (pointers into a default-constructed struct) under the
// compatibility rule: the first `required` fields must be present, later ones keep their
// defaults when missing, and elements beyond the last field are ignored.
template <typename... T>
Status GetFields(const msgpack::object& o, size_t required,
                 const std::array<const char*, sizeof...(T)>& names, T*... fields) {
  if (o.type != msgpack::type::ARRAY) return Wrong("an array");
  const size_t n = o.via.array.size;
  if (n < required) {
    return Status::Corruption("has " + std::to_string(n) + " fields, needs at least " +
                              std::to_string(required) + " (missing '" + names[n] + "')");
  }
  Status st;
  size_t i = 0;
  auto one = [&](auto* field) {
    if (i >= n) return false;  // missing trailing field: keeps its default
    Status s = Get(o.via.array.ptr[i], field);
    if (!s.ok()) {
      st = Status::Corruption(std::string("field '") + names[i] + "' " + s.message());
      return false;
    }
    ++i;
    return true;
  };
  (one(fields) && ...);  // left to right, stopping at the first error or missing field
  return st;
}

template <typename T>
void Put(Writer& w, const std::vector<T>& v) {
  w.pk().pack_array(static_cast<uint32_t>(v.size()));
  for (const T& e : v) Put(w, e);
}

template <typename T>
void Put(Writer& w, const std::optional<T>& v) {
  if (v.has_value()) {
    Put(w, *v);
  } else {
    w.pk().pack_nil();
  }
}

template <typename T>
Status Get(const msgpack::object& o, std::vector<T>* v) {
  if (o.type != msgpack::type::ARRAY) return Wrong("an array");
  // Grown element by element (no reserve from the claimed size): garbage fails at its first
  // bad element before anything large is allocated.
  std::vector<T> result;
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    T e{};
    Status s = Get(o.via.array.ptr[i], &e);
    if (!s.ok()) return Status::Corruption("element " + std::to_string(i) + " " + s.message());
    result.push_back(std::move(e));
  }
  *v = std::move(result);
  return Status::OK();
}

template <typename T>
Status Get(const msgpack::object& o, std::optional<T>* v) {
  if (o.type == msgpack::type::NIL) {
    v->reset();
    return Status::OK();
  }
  T value{};
  PROPELLER_RETURN_IF_ERROR(Get(o, &value));
  *v = std::move(value);
  return Status::OK();
}


template <typename T>
void EncodeMessage(const T& msg, std::string* out) {
  Writer w(out);
  Put(w, msg);
}

// Parses `bytes` as one T; on success replaces *msg. Errors read "<what>: <problem>".
template <typename T>
Status DecodeMessage(const char* what, std::string_view bytes, T* msg) {
  return msgpack_util::ParseAndDecode(
      what, bytes, kMaxWireArray, kMaxDepth, [what, msg](const msgpack::object& o) -> Status {
        T m{};
        Status s = Get(o, &m);
        if (!s.ok()) return Status::Corruption(std::string(what) + ": " + s.message());
        *msg = std::move(m);
        return Status::OK();
      });
}

}  // namespace propeller::wire::codec

#endif  // PROPELLER_SCHEMAS_WIRE_CODEC_H_
