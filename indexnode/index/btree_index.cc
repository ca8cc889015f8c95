// The btree index: range scans over order-preserving LMDB keys (see btree_index.h).
//
// Every query becomes one cursor scan [start, stop): start is found with MDB_SET_RANGE, and
// the scan runs while the key stays below (or at) a limit. Bounds map to keys like this, with
// V = AppendIndexValue(bound) and ids being the 12-byte FileId suffix:
//
//   lo inclusive           start = V                  (the first entry of V)
//   lo exclusive           start = V ‖ FF×12 ‖ 00     (past every V ‖ id)
//   hi inclusive           continue while key <= V ‖ FF×12
//   hi exclusive           continue while key <  V
//   no lo / no hi          start = tag / continue while key < tag+1 (tag 02 numbers, 03 strings)
//
// This is exact because value parts are prefix-free (numbers are 17 bytes, strings end with
// their terminator), so every key ordered between two of those limits has a value part
// between the bounds. A truncated string bound (terminator 00 02) stands for every string
// with that key, some below and some above the bound, so it is always treated as inclusive.
#include "indexnode/index/btree_index.h"

#include <algorithm>
#include <span>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/lmdb_util.h"
#include "schemas/keys.h"

namespace propeller {
namespace {

constexpr char kNumberTag = '\x02';
constexpr char kStringTag = '\x03';

// "bt.<name>": one key per entry; "bp.<name>": posting chunks.
std::string DbName(const std::string& name, bool postings) {
  return (postings ? "bp." : "bt.") + name;
}

bool IsTruncatedString(std::string_view encoded) {
  return encoded.size() >= 3 && encoded[0] == kStringTag && encoded.back() == '\x02';
}

// The smallest key above every entry whose value part is `encoded`.
std::string AfterAllIds(std::string_view encoded) {
  std::string key(encoded);
  key.append(kFileIdKeySize, '\xff');
  key.push_back('\0');
  return key;
}

// ---- posting chunks (btree_index.h) ----

bool ReadVarint(std::string_view* in, uint64_t* x) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) {
      *x = v;
      return true;
    }
  }
  return false;
}

// The ids of a chunk after its first (the key's): ascending, each coded against the one
// before it — a varint of (ino delta << 1) within a volume, or a varint 1 then the volume and
// the ino as varints when the volume changes (or the delta does not fit in 62 bits).
void AppendDelta(FileId prev, FileId id, std::string* out) {
  char buf[3 * 10];
  size_t n = 0;
  auto put = [&](uint64_t x) {
    while (x >= 0x80) {
      buf[n++] = static_cast<char>(x | 0x80);
      x >>= 7;
    }
    buf[n++] = static_cast<char>(x);
  };
  if (id.volume == prev.volume && id.ino - prev.ino < (uint64_t{1} << 62)) {
    put((id.ino - prev.ino) << 1);
  } else {
    put(1);
    put(id.volume);
    put(id.ino);
  }
  out->append(buf, n);
}

// Reads the entry at the front of *in (coded against `prev`) into *id.
Status ReadEntry(std::string_view* in, FileId prev, FileId* id) {
  uint64_t x = 0;
  if (!ReadVarint(in, &x)) return Status::Corruption("truncated posting chunk");
  *id = prev;
  if (x & 1) {
    uint64_t volume = 0;
    if (x != 1 || !ReadVarint(in, &volume) || volume > UINT32_MAX || !ReadVarint(in, &id->ino)) {
      return Status::Corruption("malformed posting chunk");
    }
    id->volume = static_cast<uint32_t>(volume);
  } else {
    id->ino = prev.ino + (x >> 1);
  }
  if (!(prev < *id)) return Status::Corruption("posting chunk out of order");
  return Status::OK();
}

// One cursor scan: from the first key >= start (the first key when start is empty) while the
// key is below `stop` (or equal to it when stop_inclusive), or, with `prefix` set, while the
// key starts with `prefix`.
struct ScanRange {
  std::string start;
  std::string stop;  // empty: no upper limit
  bool stop_inclusive = false;
  std::string prefix;  // used instead of stop when non-empty
  bool dedupe = true;  // false when keys cannot repeat an id (a single value part)
  bool unsupported = false;  // the query's kind is not one a B-tree answers
};

class BTreeIndex final : public Index {
 public:
  BTreeIndex(std::string name, std::string key_prefix, bool postings, MDB_dbi dbi,
             uint64_t count)
      : name_(std::move(name)),
        key_prefix_(std::move(key_prefix)),
        postings_(postings),
        dbi_(dbi),
        count_(count) {}

  IndexType type() const override { return IndexType::kBTree; }
  const std::string& name() const override { return name_; }

  Status Insert(MDB_txn* txn, const AttrValue& value, FileId id) override {
    if (postings_) return InsertPosting(txn, value, id);
    const std::string key = key_prefix_ + IndexEntryKey(value, id);
    MDB_val k = Val(key);
    MDB_val v{0, nullptr};
    const int rc = mdb_put(txn, dbi_, &k, &v, MDB_NOOVERWRITE);
    if (rc == MDB_KEYEXIST) return Status::OK();
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "btree index " + name_ + ": put");
    if (key_prefix_.empty()) ++count_;
    return Status::OK();
  }

  Status Remove(MDB_txn* txn, const AttrValue& value, FileId id) override {
    if (postings_) return RemovePosting(txn, value, id);
    const std::string key = key_prefix_ + IndexEntryKey(value, id);
    MDB_val k = Val(key);
    const int rc = mdb_del(txn, dbi_, &k, nullptr);
    if (rc == MDB_NOTFOUND) return Status::OK();
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "btree index " + name_ + ": delete");
    if (key_prefix_.empty()) --count_;
    return Status::OK();
  }

  using Index::InsertPoint;
  Status InsertPoint(MDB_txn*, const KdPoint&, FileId, uint64_t) override {
    return Status::NotSupported("btree index " + name_ + ": InsertPoint");
  }
  Status RemovePoint(MDB_txn*, FileId) override {
    return Status::NotSupported("btree index " + name_ + ": RemovePoint");
  }

  Status Search(MDB_txn* txn, const IndexQuery& q, const IdCallback& fn) const override {
    ScanRange range;
    if (!RangeOf(q, &range)) return Status::OK();
    return Scan(txn, range, fn);
  }

  // As Search, without a call through std::function per id: a keyword search reads a few
  // hundred thousand ids from posting chunks, and the call per id was ~7% of its profile's
  // samples (its wall time is bound by memory latency and did not move measurably).
  Status Collect(MDB_txn* txn, const IndexQuery& q, std::vector<FileId>* out) const override {
    ScanRange range;
    if (!RangeOf(q, &range)) return Status::OK();
    // Room for a chunk's ids before they are read: one growth per chunk, where push_back grew
    // the set ~6 times for the ~35 ids a sparse keyword has in an ACG (an id takes at least a
    // byte of the chunk, so the chunk's size bounds its count).
    auto room = [out](size_t most) {
      if (out->capacity() - out->size() < most) {
        out->reserve(std::max(out->size() + most, 2 * out->capacity()));
      }
    };
    return Scan(
        txn, range,
        [out](FileId id) {
          out->push_back(id);
          return true;
        },
        room);
  }

  // The scan that answers q; false when nothing can match. A kind a B-tree cannot answer
  // sets range->unsupported, which Scan reports as NotSupported.
  bool RangeOf(const IndexQuery& q, ScanRange* range) const {
    switch (q.kind) {
      case IndexQuery::Kind::kEqual:
        AppendIndexValue(q.value, &range->prefix);
        range->start = range->prefix;
        range->dedupe = false;  // every key under this prefix has this one value part
        return true;
      case IndexQuery::Kind::kPrefix:
        AppendIndexStringPrefix(q.prefix, &range->prefix);
        range->start = range->prefix;
        return true;
      case IndexQuery::Kind::kRange:
        return RangeToScan(q, range);  // false: bounds of different types
      default:
        range->unsupported = true;
        return true;
    }
  }

  uint64_t Size() const override { return count_; }
  void set_count(uint64_t count) { count_ = count; }
  uint64_t MemoryBytes() const override { return 0; }

  bool loaded() const override { return true; }
  Status Load(MDB_txn*) override { return Status::OK(); }
  void Unload() override {}
  Status Reattach(MDB_txn* txn) override {
    const std::string db = DbName(name_, postings_);
    int rc = mdb_dbi_open(txn, db.c_str(), MDB_CREATE, &dbi_);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "reopen " + db);
    return Count(txn, &count_);
  }

  // The entries when the index has its database alone (else 0: see count_).
  Status Count(MDB_txn* txn, uint64_t* count) const {
    *count = 0;
    if (!key_prefix_.empty()) return Status::OK();
    if (postings_) {
      ScanRange all;
      all.dedupe = false;
      return Scan(txn, all, [&](FileId) {
        ++*count;
        return true;
      });
    }
    MDB_stat stat;
    const int rc = mdb_stat(txn, dbi_, &stat);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "stat " + DbName(name_, postings_));
    *count = stat.ms_entries;
    return Status::OK();
  }
  Status Rebalance() override { return Status::OK(); }

 private:
  // Fills `range` for a kRange query; false when no entry can match.
  static bool RangeToScan(const IndexQuery& q, ScanRange* range) {
    if (!q.lo && !q.hi) return true;  // everything: start "" and no stop
    const bool lo_string = q.lo && std::holds_alternative<std::string>(q.lo->value);
    const bool hi_string = q.hi && std::holds_alternative<std::string>(q.hi->value);
    if (q.lo && q.hi && lo_string != hi_string) return false;
    const char tag = (lo_string || hi_string) ? kStringTag : kNumberTag;
    if (q.lo) {
      AppendIndexValue(q.lo->value, &range->start);
      if (!q.lo->inclusive && !IsTruncatedString(range->start)) {
        range->start = AfterAllIds(range->start);
      }
    } else {
      range->start.assign(1, tag);
    }
    if (q.hi) {
      std::string hi;
      AppendIndexValue(q.hi->value, &hi);
      if (q.hi->inclusive || IsTruncatedString(hi)) {
        range->stop = hi.append(kFileIdKeySize, '\xff');
        range->stop_inclusive = true;
      } else {
        range->stop = std::move(hi);
      }
    } else {
      range->stop.assign(1, static_cast<char>(tag + 1));
    }
    return true;
  }

  // The scan of `unprefixed` within this index's key range (key_prefix_).
  // fn: bool(FileId), false to stop. A template so that Collect's callback is inlined.
  // room(n): told before a posting chunk's ids that at most n of them follow.
  template <typename Fn>
  Status Scan(MDB_txn* txn, const ScanRange& unprefixed, Fn&& fn) const {
    return Scan(txn, unprefixed, std::forward<Fn>(fn), [](size_t) {});
  }
  template <typename Fn, typename Room>
  Status Scan(MDB_txn* txn, const ScanRange& unprefixed, Fn&& fn, Room&& room) const {
    if (unprefixed.unsupported) {
      return Status::NotSupported("btree index " + name_ + ": query kind");
    }
    ScanRange range = unprefixed;
    if (!key_prefix_.empty()) {
      range.start.insert(0, key_prefix_);
      if (!range.stop.empty()) range.stop.insert(0, key_prefix_);
      range.prefix.insert(0, key_prefix_);
    }
    MDB_cursor* cursor = nullptr;
    int rc = mdb_cursor_open(txn, dbi_, &cursor);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "btree index " + name_ + ": cursor");
    CursorGuard closer(cursor);
    MDB_val k = Val(range.start);
    MDB_val v;
    rc = range.start.empty() ? mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
                             : mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE);
    std::unordered_set<FileId, FileIdHash> seen;
    for (; rc == MDB_SUCCESS; rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
      std::string_view key = View(k);
      if (!key.starts_with(key_prefix_)) break;  // another ACG's entries
      if (!range.prefix.empty()) {
        if (!key.starts_with(range.prefix)) break;
      } else if (!range.stop.empty()) {
        const int c = key.compare(range.stop);
        if (c > 0 || (c == 0 && !range.stop_inclusive)) break;
      }
      std::string_view value_part;
      FileId id;
      key.remove_prefix(key_prefix_.size());
      Status s = SplitIndexEntryKey(key, &value_part, &id);
      if (!s.ok()) return s.WithContext("btree index " + name_);
      if (!postings_) {
        if (range.dedupe && !seen.insert(id).second) continue;
        if (!fn(id)) return Status::OK();
        continue;
      }
      std::string_view tail = View(v);
      room(tail.size() + 1);
      for (FileId c = id;;) {
        if (!range.dedupe || seen.insert(c).second) {
          if (!fn(c)) return Status::OK();
        }
        if (tail.empty()) break;
        s = ReadEntry(&tail, c, &c);
        if (!s.ok()) return s.WithContext("btree index " + name_);
      }
    }
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "btree index " + name_ + ": scan");
    }
    return Status::OK();
  }

  // A chunk found by FindChunk, copied out of LMDB's page (a write moves it).
  struct Chunk {
    std::string key;   // base ‖ FileIdKey(first); empty: none
    FileId first;
    std::string tail;  // the value: the other ids (AppendDelta)
  };

  // The chunk of `base` (key prefix ‖ value part) that holds or would hold `id`, the one with
  // the greatest first id <= id, into *at (the cursor stays on it); at->key empty when every
  // chunk of `base` starts above `id`, and then *next is the first of them (key empty: none).
  Status FindChunk(MDB_cursor* cur, const std::string& base, FileId id, Chunk* at,
                   Chunk* next) const {
    at->key.clear();
    next->key.clear();
    std::string& probe = probe_;
    probe.assign(base);
    AppendFileIdKey(id, &probe);
    MDB_val k = Val(probe), v;
    auto take = [&](Chunk* c) -> Status {
      c->key.assign(View(k));
      c->tail.assign(View(v));
      return DecodeFileIdKey(View(k).substr(base.size()), &c->first);
    };
    int rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    if (rc == MDB_SUCCESS && View(k).starts_with(base)) {
      if (View(k) == probe) return take(at);
      PROPELLER_RETURN_IF_ERROR(take(next));
    }
    if (rc == MDB_SUCCESS) {
      rc = mdb_cursor_get(cur, &k, &v, MDB_PREV);
    } else if (rc == MDB_NOTFOUND) {
      rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
    }
    if (rc == MDB_SUCCESS && View(k).starts_with(base)) return take(at);
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "btree index " + name_ + ": seek");
    }
    return Status::OK();
  }

  Status Put(MDB_txn* txn, std::string_view key, std::string_view tail) {
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    MDB_val v{tail.size(), const_cast<char*>(tail.data())};
    const int rc = mdb_put(txn, dbi_, &k, &v, 0);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "btree index " + name_ + ": put");
    return Status::OK();
  }

  // Rewrites the value of the chunk under the cursor (FindChunk left it at `key`): no second
  // descent of the tree.
  Status ReplaceCurrent(MDB_cursor* cur, const std::string& key, std::string_view tail) {
    MDB_val k = Val(key);
    MDB_val v{tail.size(), const_cast<char*>(tail.data())};
    const int rc = mdb_cursor_put(cur, &k, &v, MDB_CURRENT);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "btree index " + name_ + ": put");
    return Status::OK();
  }

  Status DeleteKey(MDB_txn* txn, const std::string& key) {
    MDB_val k = Val(key);
    const int rc = mdb_del(txn, dbi_, &k, nullptr);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "btree index " + name_ + ": delete");
    return Status::OK();
  }

  std::string ChunkKey(const std::string& base, FileId first) const {
    std::string key = base;
    AppendFileIdKey(first, &key);
    return key;
  }

  // The start of a change to (value, id): base_ = key prefix ‖ value part, a cursor in *cur
  // (opened here, closed by the caller, even on error) left by FindChunk on at_, and next_.
  Status SeekChunk(MDB_txn* txn, const AttrValue& value, FileId id, MDB_cursor** cur) {
    base_.assign(key_prefix_);
    AppendIndexValue(value, &base_);
    const int rc = mdb_cursor_open(txn, dbi_, cur);
    if (rc != MDB_SUCCESS) {
      *cur = nullptr;
      return LmdbStatus(rc, "btree index " + name_ + ": cursor");
    }
    if (Status s = FindChunk(*cur, base_, id, &at_, &next_); !s.ok()) {
      return s.WithContext("btree index " + name_);  // (built only on error: a hot path)
    }
    return Status::OK();
  }

  // Changes below splice the chunk's bytes: an entry is coded against the one before it, so
  // inserting or removing one re-codes at most its successor, and the bytes after stay.
  Status InsertPosting(MDB_txn* txn, const AttrValue& value, FileId id) {
    MDB_cursor* cur = nullptr;
    const Status found = SeekChunk(txn, value, id, &cur);
    CursorGuard closer(cur);
    if (!found.ok()) return found;
    const std::string& base = base_;
    Chunk& at = at_;
    Chunk& next = next_;
    std::string& tail = scratch_;
    if (at.key.empty()) {
      // Below every chunk of the value: the new first id, ahead of the next chunk if it fits.
      tail.clear();
      if (!next.key.empty()) {
        AppendDelta(id, next.first, &tail);
        tail += next.tail;
      }
      if (!next.key.empty() && tail.size() <= kMaxChunkBytes) {
        PROPELLER_RETURN_IF_ERROR(DeleteKey(txn, next.key));
        PROPELLER_RETURN_IF_ERROR(Put(txn, ChunkKey(base, id), tail));
      } else {
        PROPELLER_RETURN_IF_ERROR(Put(txn, ChunkKey(base, id), std::string_view()));
      }
      if (key_prefix_.empty()) ++count_;
      return Status::OK();
    }
    if (at.first == id) return Status::OK();  // present
    // Walk to the first entry above id.
    std::string_view rest = at.tail;
    FileId prev = at.first, cur_id{};
    size_t entry_start = 0;
    bool above = false;
    while (!rest.empty()) {
      entry_start = at.tail.size() - rest.size();
      if (Status s = ReadEntry(&rest, prev, &cur_id); !s.ok()) {
        return s.WithContext("btree index " + name_);
      }
      if (cur_id == id) return Status::OK();  // present
      if (cur_id > id) {
        above = true;
        break;
      }
      prev = cur_id;
    }
    tail.clear();
    if (!above) {  // the new last id
      tail.append(at.tail);
      AppendDelta(prev, id, &tail);
    } else {
      tail.append(at.tail, 0, entry_start);
      AppendDelta(prev, id, &tail);
      AppendDelta(id, cur_id, &tail);
      tail.append(rest);
    }
    if (tail.size() <= kMaxChunkBytes) {
      PROPELLER_RETURN_IF_ERROR(ReplaceCurrent(cur, at.key, tail));
    } else if (!above) {
      // Ids arriving in order (new files) leave full chunks behind: the old one stays.
      PROPELLER_RETURN_IF_ERROR(Put(txn, ChunkKey(base, id), std::string_view()));
    } else {
      // Halve it: the entry at the middle byte starts the second chunk; the bytes after it
      // are coded against it already.
      std::string_view walk = tail;
      FileId p = at.first, c;
      size_t cut = 0;
      while (tail.size() - walk.size() < tail.size() / 2) {
        cut = tail.size() - walk.size();
        PROPELLER_RETURN_IF_ERROR(ReadEntry(&walk, p, &c));
        p = c;
      }
      const std::string second_key = ChunkKey(base, p);
      const std::string second_tail(walk);
      tail.resize(cut);
      PROPELLER_RETURN_IF_ERROR(ReplaceCurrent(cur, at.key, tail));
      PROPELLER_RETURN_IF_ERROR(Put(txn, second_key, second_tail));
    }
    if (key_prefix_.empty()) ++count_;
    return Status::OK();
  }

  Status RemovePosting(MDB_txn* txn, const AttrValue& value, FileId id) {
    MDB_cursor* cur = nullptr;
    const Status found = SeekChunk(txn, value, id, &cur);
    CursorGuard closer(cur);
    if (!found.ok()) return found;
    const std::string& base = base_;
    Chunk& at = at_;
    if (at.key.empty()) return Status::OK();  // absent
    std::string_view rest = at.tail;
    if (at.first == id) {
      // The second id becomes the first (the key names it); what follows is coded against it.
      PROPELLER_RETURN_IF_ERROR(DeleteKey(txn, at.key));
      if (!rest.empty()) {
        FileId second;
        PROPELLER_RETURN_IF_ERROR(ReadEntry(&rest, at.first, &second));
        PROPELLER_RETURN_IF_ERROR(Put(txn, ChunkKey(base, second), rest));
      }
    } else {
      FileId prev = at.first, cur_id{};
      size_t entry_start = 0;
      bool found = false;
      while (!rest.empty()) {
        entry_start = at.tail.size() - rest.size();
        PROPELLER_RETURN_IF_ERROR(ReadEntry(&rest, prev, &cur_id));
        if (cur_id >= id) {
          found = cur_id == id;
          break;
        }
        prev = cur_id;
      }
      if (!found) return Status::OK();  // absent
      std::string& tail = scratch_;
      tail.assign(at.tail, 0, entry_start);
      if (!rest.empty()) {  // the successor, re-coded against the one before the removed id
        FileId after;
        PROPELLER_RETURN_IF_ERROR(ReadEntry(&rest, id, &after));
        AppendDelta(prev, after, &tail);
        tail.append(rest);
      }
      PROPELLER_RETURN_IF_ERROR(ReplaceCurrent(cur, at.key, tail));
    }
    if (key_prefix_.empty()) --count_;
    return Status::OK();
  }

  // A chunk's value (the ids after its first) stays within this: small enough that a change
  // rewrites little, large enough that the key (value ‖ first id) is paid once per ~100 ids.
  static constexpr size_t kMaxChunkBytes = 128;

  const std::string name_;
  const std::string key_prefix_;  // leads every key of this index (index.h)
  const bool postings_;           // posting chunks (btree_index.h), else one key per entry
  // Scratch of the single writer (InsertPosting, RemovePosting), kept to spare allocations.
  std::string base_, scratch_;
  mutable std::string probe_;
  Chunk at_, next_;
  MDB_dbi dbi_;     // changed only by Reattach (exclusive, like a mutation)
  // Entries in the database when the index has it alone (no key prefix; else 0: counting a
  // key range would read it). Changed only by the single writer.
  uint64_t count_;
};

}  // namespace

Result<std::unique_ptr<Index>> OpenBTreeIndex(MDB_txn* txn, const std::string& name,
                                              std::string_view key_prefix, bool postings) {
  const std::string db = DbName(name, postings);
  MDB_dbi dbi;
  int rc = mdb_dbi_open(txn, db.c_str(), MDB_CREATE, &dbi);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "open " + db);
  auto index = std::make_unique<BTreeIndex>(name, std::string(key_prefix), postings, dbi, 0);
  uint64_t count = 0;
  PROPELLER_RETURN_IF_ERROR(index->Count(txn, &count));
  index->set_count(count);
  return std::unique_ptr<Index>(std::move(index));
}

Status DropBTreeIndexData(MDB_txn* txn, const std::string& name, std::string_view key_prefix) {
  PROPELLER_RETURN_IF_ERROR(DropIndexDatabase(txn, DbName(name, false), key_prefix));
  return DropIndexDatabase(txn, DbName(name, true), key_prefix);
}

}  // namespace propeller
