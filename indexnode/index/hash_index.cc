// The hash index: an in-memory table encoded value -> ids, persisted in LMDB (hash_index.h).
//
// Memory layout. The table is a std::unordered_map<std::string, IdSet> keyed by the encoded
// value (AppendIndexValue: "\x03" word "\x00\x01" for a keyword, short enough for the string's
// inline buffer up to 12 bytes of word). IdSet is 24 bytes and has three forms, chosen by size:
//   - 0 or 1 id: stored inline (no allocation). Most keyword tokens of an ACG (file names)
//     belong to one file, so this is the common case;
//   - 2..8 ids: an unsorted heap array, scanned linearly (cheaper than hashing at this size);
//   - more: an open-addressing table (linear probing, backward-shift deletion, load <= 3/4,
//     shrunk when it falls below 1/8), so insert and remove stay O(1) even for tokens shared
//     by a whole 50k-file ACG ("home", "src"): a sorted vector would move ~400 KB per change.
// Cost on x86-64 with glibc (MemoryBytes() uses the same figures): a distinct value costs
// ~88 bytes of map node + 8 of bucket (+ the key when longer than 15 bytes); each further id
// costs 16 bytes in an array or 21-43 bytes in a table (16 per slot at load 3/8..3/4).
// Measured by hash_index_test (MemoryPerEntry; heap growth from mallinfo2 vs. MemoryBytes()):
// every value unique 88 (est. 96) bytes per entry; values shared by ~1000 ids 30 (30);
// keyword-like, 6 tokens per file of which 1 unique and 5 from a skewed set of 2000, 44 (46).
#include "indexnode/index/hash_index.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "schemas/keys.h"

namespace propeller {
namespace {

std::string DbName(const std::string& name) { return "hs." + name; }

// glibc malloc adds about this much per allocation (header + rounding).
constexpr uint64_t kMallocOverhead = 16;

// A set of FileIds; see the file comment for its three forms. Not thread-safe for writes;
// const methods may run concurrently.
class IdSet {
 public:
  IdSet() : one_ino_(0) {}
  ~IdSet() {
    if (capacity_ != 0) delete[] slots_;
  }
  IdSet(const IdSet&) = delete;
  IdSet& operator=(const IdSet&) = delete;

  // True when `id` was not in the set.
  bool Insert(FileId id) {
    if (capacity_ == 0) {
      if (size_ == 0) {
        SetOne(id);
        size_ = 1;
        return true;
      }
      if (One() == id) return false;
      FileId* a = new FileId[2];
      a[0] = One();
      a[1] = id;
      slots_ = a;
      capacity_ = 2;
      size_ = 2;
      return true;
    }
    if (capacity_ <= kLinearMax) {
      for (uint32_t i = 0; i < size_; ++i) {
        if (slots_[i] == id) return false;
      }
      if (size_ < capacity_) {
        slots_[size_++] = id;
        return true;
      }
      if (capacity_ < kLinearMax) {
        Reallocate(capacity_ * 2);
        slots_[size_++] = id;
        return true;
      }
      RebuildTable(kMinTable);
      return TableInsert(id);
    }
    return TableInsert(id);
  }

  // True when `id` was in the set.
  bool Erase(FileId id) {
    if (capacity_ == 0) {
      if (size_ == 1 && One() == id) {
        size_ = 0;
        return true;
      }
      return false;
    }
    if (capacity_ <= kLinearMax) {
      for (uint32_t i = 0; i < size_; ++i) {
        if (slots_[i] != id) continue;
        slots_[i] = slots_[--size_];
        if (size_ == 1) {
          const FileId last = slots_[0];
          delete[] slots_;
          capacity_ = 0;
          SetOne(last);
        }
        return true;
      }
      return false;
    }
    if (!TableErase(id)) return false;
    if (size_ <= kLinearMax / 2) {
      ToLinear();
    } else if (uint64_t{size_} * 8 < capacity_) {
      RebuildTable(TableCapacityFor(size_));
    }
    return true;
  }

  uint32_t size() const { return size_; }

  // Calls fn(id) for each id until it returns false; false when stopped early.
  template <typename Fn>
  bool ForEach(const Fn& fn) const {
    if (capacity_ == 0) return size_ == 0 || fn(One());
    if (capacity_ <= kLinearMax) {
      for (uint32_t i = 0; i < size_; ++i) {
        if (!fn(slots_[i])) return false;
      }
      return true;
    }
    for (uint32_t i = 0; i < capacity_; ++i) {
      if (slots_[i] != kEmpty && !fn(slots_[i])) return false;
    }
    return !has_empty_id_ || fn(kEmpty);
  }

  uint64_t HeapBytes() const {
    return capacity_ == 0 ? 0 : uint64_t{capacity_} * sizeof(FileId) + kMallocOverhead;
  }

 private:
  static constexpr uint32_t kLinearMax = 8;   // arrays up to this capacity are scanned
  static constexpr uint32_t kMinTable = 16;   // tables start here (load 1/2 after 8 ids)
  // Marks a free table slot. A real id equal to it is kept in has_empty_id_.
  static constexpr FileId kEmpty{UINT32_MAX, UINT64_MAX};

  static uint64_t Mix(FileId id) {  // splitmix64 finaliser over both fields
    uint64_t x = id.ino + 0x9E3779B97F4A7C15ull * (uint64_t{id.volume} + 1);
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }

  static uint32_t TableCapacityFor(uint32_t n) {
    uint32_t cap = kMinTable;
    while (uint64_t{cap} < uint64_t{n} * 2) cap *= 2;  // load <= 1/2 after a rebuild
    return cap;
  }

  FileId One() const { return FileId{one_volume_, one_ino_}; }
  void SetOne(FileId id) {
    one_volume_ = id.volume;
    one_ino_ = id.ino;
  }

  // Linear form: moves the size_ ids into a new array of `capacity`.
  void Reallocate(uint32_t capacity) {
    FileId* a = new FileId[capacity];
    std::copy(slots_, slots_ + size_, a);
    delete[] slots_;
    slots_ = a;
    capacity_ = capacity;
  }

  // From the linear or table form to a table of `capacity` holding the same ids.
  void RebuildTable(uint32_t capacity) {
    FileId* old = slots_;
    const uint32_t old_capacity = capacity_;
    const bool was_table = old_capacity > kLinearMax;
    const uint32_t old_count = was_table ? old_capacity : size_;
    slots_ = new FileId[capacity];
    std::fill(slots_, slots_ + capacity, kEmpty);
    capacity_ = capacity;
    for (uint32_t i = 0; i < old_count; ++i) {
      if (old[i] == kEmpty) continue;  // a free slot, or the flagged id (stays flagged)
      Place(old[i]);
    }
    if (!was_table && std::find(old, old + old_count, kEmpty) != old + old_count) {
      has_empty_id_ = true;
    }
    delete[] old;
  }

  // From the table form to a linear array of kLinearMax. REQUIRES: size_ <= kLinearMax.
  void ToLinear() {
    FileId* a = new FileId[kLinearMax];
    uint32_t n = 0;
    ForEach([&](FileId id) {
      a[n++] = id;
      return true;
    });
    delete[] slots_;
    slots_ = a;
    capacity_ = kLinearMax;
    has_empty_id_ = false;
  }

  // Writes `id` into the first free slot of its probe sequence. REQUIRES: table form, id not
  // present, id != kEmpty, a free slot exists.
  void Place(FileId id) {
    const uint32_t mask = capacity_ - 1;
    uint32_t i = static_cast<uint32_t>(Mix(id)) & mask;
    while (slots_[i] != kEmpty) i = (i + 1) & mask;
    slots_[i] = id;
  }

  // The slot holding `id`, or capacity_ when absent. REQUIRES: table form, id != kEmpty.
  uint32_t Find(FileId id) const {
    const uint32_t mask = capacity_ - 1;
    for (uint32_t i = static_cast<uint32_t>(Mix(id)) & mask;; i = (i + 1) & mask) {
      if (slots_[i] == id) return i;
      if (slots_[i] == kEmpty) return capacity_;
    }
  }

  bool TableInsert(FileId id) {
    if (id == kEmpty) {
      if (has_empty_id_) return false;
      has_empty_id_ = true;
      ++size_;
      return true;
    }
    if (Find(id) != capacity_) return false;
    if ((uint64_t{size_} + 1) * 4 > uint64_t{capacity_} * 3) RebuildTable(capacity_ * 2);
    Place(id);
    ++size_;
    return true;
  }

  bool TableErase(FileId id) {
    if (id == kEmpty) {
      if (!has_empty_id_) return false;
      has_empty_id_ = false;
      --size_;
      return true;
    }
    uint32_t hole = Find(id);
    if (hole == capacity_) return false;
    // Backward-shift deletion: pull later members of the probe run into the hole when their
    // home slot does not lie cyclically in (hole, j].
    const uint32_t mask = capacity_ - 1;
    for (uint32_t j = (hole + 1) & mask; slots_[j] != kEmpty; j = (j + 1) & mask) {
      const uint32_t home = static_cast<uint32_t>(Mix(slots_[j])) & mask;
      const bool home_in_gap = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (home_in_gap) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = kEmpty;
    --size_;
    return true;
  }

  union {
    uint64_t one_ino_;  // capacity_ == 0 and size_ == 1
    FileId* slots_;     // capacity_ > 0
  };
  uint32_t one_volume_ = 0;
  uint32_t size_ = 0;
  uint32_t capacity_ = 0;     // 0: inline; <= kLinearMax: array; else table (a power of two)
  bool has_empty_id_ = false; // table form: kEmpty itself is a member
};

// Bytes of one map node: the key and IdSet, the next pointer and cached hash, malloc overhead.
constexpr uint64_t kNodeBytes =
    sizeof(std::pair<const std::string, IdSet>) + 2 * sizeof(void*) + kMallocOverhead;

uint64_t KeyHeapBytes(const std::string& key) {
  constexpr size_t kInlineCapacity = 15;  // libstdc++ small-string buffer
  return key.capacity() > kInlineCapacity ? key.capacity() + 1 + kMallocOverhead : 0;
}

class HashIndex final : public Index {
 public:
  HashIndex(std::string name, std::string key_prefix, MDB_dbi dbi)
      : name_(std::move(name)), key_prefix_(std::move(key_prefix)), dbi_(dbi) {}

  IndexType type() const override { return IndexType::kHash; }
  const std::string& name() const override { return name_; }

  Status Insert(MDB_txn* txn, const AttrValue& value, FileId id) override {
    std::string encoded;
    AppendIndexValue(value, &encoded);
    std::string key = key_prefix_;
    AppendFileIdKey(id, &key);
    key += encoded;
    MDB_val k = Val(key);
    MDB_val v{0, nullptr};
    const int rc = mdb_put(txn, dbi_, &k, &v, MDB_NOOVERWRITE);
    if (rc != MDB_SUCCESS && rc != MDB_KEYEXIST) {
      return LmdbStatus(rc, "hash index " + name_ + ": put");
    }
    if (loaded_) AddToMemory(std::move(encoded), id);
    return Status::OK();
  }

  Status Remove(MDB_txn* txn, const AttrValue& value, FileId id) override {
    std::string encoded;
    AppendIndexValue(value, &encoded);
    std::string key = key_prefix_;
    AppendFileIdKey(id, &key);
    key += encoded;
    MDB_val k = Val(key);
    const int rc = mdb_del(txn, dbi_, &k, nullptr);
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) {
      return LmdbStatus(rc, "hash index " + name_ + ": delete");
    }
    if (loaded_) RemoveFromMemory(encoded, id);
    return Status::OK();
  }

  using Index::InsertPoint;
  Status InsertPoint(MDB_txn*, const KdPoint&, FileId, uint64_t) override {
    return Status::NotSupported("hash index " + name_ + ": InsertPoint");
  }
  Status RemovePoint(MDB_txn*, FileId) override {
    return Status::NotSupported("hash index " + name_ + ": RemovePoint");
  }

  Status Search(MDB_txn*, const IndexQuery& q, const IdCallback& fn) const override {
    if (q.kind != IndexQuery::Kind::kEqual) {
      return Status::NotSupported("hash index " + name_ + ": only equality lookups");
    }
    if (!loaded_) return Status::Internal("hash index " + name_ + ": searched while not loaded");
    std::string encoded;
    AppendIndexValue(q.value, &encoded);
    const auto it = map_.find(encoded);
    if (it != map_.end()) it->second.ForEach(fn);
    return Status::OK();
  }

  uint64_t Size() const override { return size_; }

  uint64_t MemoryBytes() const override {
    return map_.size() * kNodeBytes + map_.bucket_count() * sizeof(void*) + key_heap_bytes_ +
           id_heap_bytes_;
  }

  bool loaded() const override { return loaded_; }

  void Unload() override {
    std::unordered_map<std::string, IdSet>().swap(map_);  // clear() keeps the buckets
    size_ = 0;
    key_heap_bytes_ = 0;
    id_heap_bytes_ = 0;
    loaded_ = false;
  }

  Status Reattach(MDB_txn* txn) override {
    const std::string db = DbName(name_);
    const int rc = mdb_dbi_open(txn, db.c_str(), MDB_CREATE, &dbi_);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "reopen " + db);
    return Status::OK();
  }

  Status Rebalance() override { return Status::OK(); }

  // Reads every entry of the database into memory.
  Status Load(MDB_txn* txn) override {
    if (loaded_) return Status::OK();
    Status s = LoadEntries(txn);
    if (!s.ok()) {
      Unload();
      return s;
    }
    loaded_ = true;
    return Status::OK();
  }

 private:
  Status LoadEntries(MDB_txn* txn) {
    MDB_cursor* cursor = nullptr;
    int rc = mdb_cursor_open(txn, dbi_, &cursor);
    if (rc != MDB_SUCCESS) return LmdbStatus(rc, "hash index " + name_ + ": cursor");
    MDB_val k, v;
    Status status;
    std::string entry_key;
    k = Val(key_prefix_);
    for (rc = mdb_cursor_get(cursor, &k, &v, key_prefix_.empty() ? MDB_FIRST : MDB_SET_RANGE);
         rc == MDB_SUCCESS; rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
      std::string_view key = View(k);
      if (!key.starts_with(key_prefix_)) break;  // past this index's key range
      key.remove_prefix(key_prefix_.size());
      // Stored as id ‖ value; the value is checked by re-ordering it into a B-tree entry key
      // (value ‖ id), which SplitIndexEntryKey validates.
      if (key.size() <= kFileIdKeySize) {
        status = Status::Corruption("hash index " + name_ + ": short key");
        break;
      }
      entry_key.assign(key.substr(kFileIdKeySize));
      entry_key.append(key.substr(0, kFileIdKeySize));
      std::string_view value_part;
      FileId id;
      status = SplitIndexEntryKey(entry_key, &value_part, &id);
      if (!status.ok()) {
        status = status.WithContext("hash index " + name_);
        break;
      }
      AddToMemory(std::string(value_part), id);
    }
    mdb_cursor_close(cursor);
    if (!status.ok()) return status;
    if (rc != MDB_NOTFOUND) return LmdbStatus(rc, "hash index " + name_ + ": load");
    return Status::OK();
  }

  void AddToMemory(std::string encoded, FileId id) {
    auto [it, inserted] = map_.try_emplace(std::move(encoded));
    if (inserted) key_heap_bytes_ += KeyHeapBytes(it->first);
    const uint64_t before = it->second.HeapBytes();
    if (it->second.Insert(id)) ++size_;
    id_heap_bytes_ += it->second.HeapBytes() - before;
  }

  void RemoveFromMemory(const std::string& encoded, FileId id) {
    const auto it = map_.find(encoded);
    if (it == map_.end()) return;
    const uint64_t before = it->second.HeapBytes();
    if (it->second.Erase(id)) --size_;
    id_heap_bytes_ -= before - it->second.HeapBytes();
    if (it->second.size() == 0) {
      key_heap_bytes_ -= KeyHeapBytes(it->first);
      map_.erase(it);
    }
  }

  const std::string name_;
  const std::string key_prefix_;  // leads every key of this index (index.h)
  MDB_dbi dbi_;  // changed only by Reattach (exclusive, like a mutation)
  // Changed only by the single writer; read by concurrent searches while no write runs.
  bool loaded_ = false;
  std::unordered_map<std::string, IdSet> map_;
  uint64_t size_ = 0;            // (value, id) entries
  uint64_t key_heap_bytes_ = 0;  // heap held by keys longer than the inline buffer
  uint64_t id_heap_bytes_ = 0;   // heap held by IdSet arrays and tables
};

}  // namespace

Result<std::unique_ptr<Index>> OpenHashIndex(MDB_txn* txn, const std::string& name) {
  return OpenHashIndex(txn, name, /*load=*/true);
}

Result<std::unique_ptr<Index>> OpenHashIndex(MDB_txn* txn, const std::string& name, bool load,
                                             std::string_view key_prefix) {
  const std::string db = DbName(name);
  MDB_dbi dbi;
  const int rc = mdb_dbi_open(txn, db.c_str(), MDB_CREATE, &dbi);
  if (rc != MDB_SUCCESS) return LmdbStatus(rc, "open " + db);
  auto index = std::make_unique<HashIndex>(name, std::string(key_prefix), dbi);
  if (load) PROPELLER_RETURN_IF_ERROR(index->Load(txn));
  return std::unique_ptr<Index>(std::move(index));
}

Status DropHashIndexData(MDB_txn* txn, const std::string& name, std::string_view key_prefix) {
  return DropIndexDatabase(txn, DbName(name), key_prefix);
}

}  // namespace propeller
