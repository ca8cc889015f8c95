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

#include <string_view>
#include <unordered_set>
#include <utility>

#include "schemas/keys.h"

namespace propeller {
namespace {

constexpr char kNumberTag = '\x02';
constexpr char kStringTag = '\x03';

std::string DbName(const std::string& name) { return "bt." + name; }

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

// Closes the cursor on every path out of a scan.
class CursorCloser {
 public:
  explicit CursorCloser(MDB_cursor* cursor) : cursor_(cursor) {}
  ~CursorCloser() { mdb_cursor_close(cursor_); }
  CursorCloser(const CursorCloser&) = delete;
  CursorCloser& operator=(const CursorCloser&) = delete;

 private:
  MDB_cursor* cursor_;
};

// One cursor scan: from the first key >= start (the first key when start is empty) while the
// key is below `stop` (or equal to it when stop_inclusive), or, with `prefix` set, while the
// key starts with `prefix`.
struct ScanRange {
  std::string start;
  std::string stop;  // empty: no upper limit
  bool stop_inclusive = false;
  std::string prefix;  // used instead of stop when non-empty
  bool dedupe = true;  // false when keys cannot repeat an id (a single value part)
};

class BTreeIndex final : public Index {
 public:
  BTreeIndex(std::string name, std::string key_prefix, MDB_dbi dbi, uint64_t count)
      : name_(std::move(name)), key_prefix_(std::move(key_prefix)), dbi_(dbi), count_(count) {}

  IndexType type() const override { return IndexType::kBTree; }
  const std::string& name() const override { return name_; }

  Status Insert(MDB_txn* txn, const AttrValue& value, FileId id) override {
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
    const std::string key = key_prefix_ + IndexEntryKey(value, id);
    MDB_val k = Val(key);
    const int rc = mdb_del(txn, dbi_, &k, nullptr);
    if (rc == MDB_NOTFOUND) return Status::OK();
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "btree index " + name_ + ": delete");
    if (key_prefix_.empty()) --count_;
    return Status::OK();
  }

  Status InsertPoint(MDB_txn*, const KdPoint&, FileId) override {
    return Status::NotSupported("btree index " + name_ + ": InsertPoint");
  }
  Status RemovePoint(MDB_txn*, FileId) override {
    return Status::NotSupported("btree index " + name_ + ": RemovePoint");
  }

  Status Search(MDB_txn* txn, const IndexQuery& q, const IdCallback& fn) const override {
    ScanRange range;
    switch (q.kind) {
      case IndexQuery::Kind::kEqual:
        AppendIndexValue(q.value, &range.prefix);
        range.start = range.prefix;
        range.dedupe = false;  // every key under this prefix has this one value part
        break;
      case IndexQuery::Kind::kPrefix:
        AppendIndexStringPrefix(q.prefix, &range.prefix);
        range.start = range.prefix;
        break;
      case IndexQuery::Kind::kRange:
        if (!RangeToScan(q, &range)) return Status::OK();  // bounds of different types
        break;
      default:
        return Status::NotSupported("btree index " + name_ + ": query kind");
    }
    return Scan(txn, range, fn);
  }

  uint64_t Size() const override { return count_; }
  uint64_t MemoryBytes() const override { return 0; }

  bool loaded() const override { return true; }
  Status Load(MDB_txn*) override { return Status::OK(); }
  void Unload() override {}
  Status Reattach(MDB_txn* txn) override {
    const std::string db = DbName(name_);
    int rc = mdb_dbi_open(txn, db.c_str(), MDB_CREATE, &dbi_);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "reopen " + db);
    MDB_stat stat;
    rc = mdb_stat(txn, dbi_, &stat);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "stat " + db);
    count_ = key_prefix_.empty() ? stat.ms_entries : 0;
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
  Status Scan(MDB_txn* txn, const ScanRange& unprefixed, const IdCallback& fn) const {
    ScanRange range = unprefixed;
    if (!key_prefix_.empty()) {
      range.start.insert(0, key_prefix_);
      if (!range.stop.empty()) range.stop.insert(0, key_prefix_);
      range.prefix.insert(0, key_prefix_);
    }
    MDB_cursor* cursor = nullptr;
    int rc = mdb_cursor_open(txn, dbi_, &cursor);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "btree index " + name_ + ": cursor");
    CursorCloser closer(cursor);
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
      if (range.dedupe && !seen.insert(id).second) continue;
      if (!fn(id)) return Status::OK();
    }
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "btree index " + name_ + ": scan");
    }
    return Status::OK();
  }

  const std::string name_;
  const std::string key_prefix_;  // leads every key of this index (index.h)
  MDB_dbi dbi_;     // changed only by Reattach (exclusive, like a mutation)
  // Entries in the database when the index has it alone (no key prefix; else 0: counting a
  // key range would read it). Changed only by the single writer.
  uint64_t count_;
};

}  // namespace

Result<std::unique_ptr<Index>> OpenBTreeIndex(MDB_txn* txn, const std::string& name,
                                              std::string_view key_prefix) {
  const std::string db = DbName(name);
  MDB_dbi dbi;
  int rc = mdb_dbi_open(txn, db.c_str(), MDB_CREATE, &dbi);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "open " + db);
  MDB_stat stat;
  rc = mdb_stat(txn, dbi, &stat);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "stat " + db);
  return std::unique_ptr<Index>(std::make_unique<BTreeIndex>(
      name, std::string(key_prefix), dbi, key_prefix.empty() ? stat.ms_entries : 0));
}

Status DropBTreeIndexData(MDB_txn* txn, const std::string& name, std::string_view key_prefix) {
  return DropIndexDatabase(txn, DbName(name), key_prefix);
}

}  // namespace propeller
