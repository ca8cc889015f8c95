// MasterStore: the master's persistent state (docs/architecture.md §7) in one LMDB environment —
// which ACG each file belongs to, which node owns each ACG, the node table, the index catalogue and
// the registered volumes. Every mutation runs in one write transaction that is committed (synced,
// unless options.sync is false) before Update() returns, so a restarted master has all of it.
//
// On disk, <dir>/ holds data.mdb and lock.mdb (LMDB) and LOCK (an flock(2) lock: one process,
// and one MasterStore in it, per directory). Named databases, format version
// kMasterFormatVersion (integers big-endian, so keys sort numerically):
//
//   db       key                                  value
//   files    FileIdKey (12 bytes, schemas/keys.h) [0] acg u64
//                                                 [8] generation u64 (format 2; an 8-byte
//                                                     value of format 1 = generation 0)
//   acgs     acg u64 (8)                          [0] record version u8 = 1
//                                                 [1] state u8 (AcgState)
//                                                 [2] node_id u32
//                                                 [6] files u64 (files mapped to the ACG)
//                                                 [14..] app bytes (the tag that created it)
//   apps     0x01 ‖ app bytes (<= 255 bytes)      acg u64: the app's current ACG for placement
//   nodes    node_id u32 (4)                      [0] record version u8 = 1; [1..] endpoint
//   indexes  name bytes                           IndexType u8
//   volumes  volume u32 (4)                       root bytes (absolute, normalised path)
//   meta     "format_version"                     u64
//            "next_acg" / "next_node" / "next_volume"   u64: the next id to hand out (from 1)
//
// Compatibility rule: record values only grow at the end (readers ignore trailing bytes and
// reject a newer record version); a store whose format_version is newer than this program's
// is refused with Corruption. ids are never reused, even after an ACG empties. A format-1
// store is upgraded in place at open (only the version changes: 8-byte file values stay
// readable); format-1 programs then refuse it instead of misreading 16-byte values.
//
// Generations. Each mapping of a file carries the id of the LMDB write transaction that made
// it (mdb_txn_id: unique and increasing across restarts), so a conditional unmap can tell the
// mapping a client saw from a later one of the same inode number.
//
// The small tables (acgs, apps, nodes, indexes, volumes, counters) are mirrored in memory, so
// placement and routing decisions read no LMDB pages; `files` (millions of entries) is read
// from LMDB. The root -> volume id direction is only in memory (rebuilt at Open), so roots may
// be longer than LMDB's 511-byte key limit.
//
// Threading: every method may be called from any thread. Update() calls run one at a time;
// reads run concurrently with them and see either all or none of a committed transaction's
// effect on each table they read. Lock order: write_mu_, then env_mu_, then mirror_mu_.
#ifndef PROPELLER_MASTER_STORE_H_
#define PROPELLER_MASTER_STORE_H_

#include <lmdb.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/record.h"
#include "common/status.h"

namespace propeller::master {

inline constexpr uint64_t kMasterFormatVersion = 2;
// App tags longer than this are refused (they are LMDB keys in `apps`).
inline constexpr size_t kMaxAppBytes = 255;

// The lifecycle of an ACG (docs/architecture.md §5). kRetired: merged into another ACG of its node,
// which now holds its files; the node routes whatever still names it. Programs from before merges
// refuse a store holding a retired ACG (unknown state) rather than misread it.
enum class AcgState : uint8_t { kActive = 1, kRetired = 2 };

// Where a file is mapped: its ACG (0 = not mapped) and the mapping's generation.
struct FileMapping {
  uint64_t acg = 0;
  uint64_t generation = 0;
  bool operator==(const FileMapping&) const = default;
};

struct AcgRecord {
  uint32_t node_id = 0;
  uint64_t files = 0;  // files mapped to this ACG in `files`
  std::string app;
  AcgState state = AcgState::kActive;
  bool operator==(const AcgRecord&) const = default;
};

// The whole store as values, for tests and debugging (equal dumps = equal stores).
struct StoreDump {
  std::map<FileId, uint64_t> files;
  std::map<uint64_t, AcgRecord> acgs;
  std::map<std::string, uint64_t> apps;
  std::map<uint32_t, std::string> nodes;
  std::map<std::string, IndexType> indexes;
  std::map<uint32_t, std::string> volumes;
  uint64_t next_acg = 1;
  uint64_t next_node = 1;
  uint64_t next_volume = 1;
  bool operator==(const StoreDump&) const = default;
};

struct MasterStoreOptions {
  std::string dir;  // REQUIRED; created if missing
  // Initial LMDB map size. The file is sparse, so a large value costs address space only; the
  // map doubles whenever a transaction finds it full. A mapped file takes ~31 bytes (measured,
  // ids inserted in order; up to ~2x that in random order): the default holds 15-30 M files
  // before the first growth.
  uint64_t initial_map_bytes = 1ull << 30;
  // false = MDB_NOSYNC: commits survive a crash of the process (kill -9) but not of the
  // machine. With sync_interval_ms > 0 a background thread fsyncs the environment that often
  // (group commit: a power loss loses at most that window — the index nodes' default
  // durability level, docs/architecture.md §10); with 0 nothing is synced until close (tests,
  // benchmarks).
  bool sync = true;
  int64_t sync_interval_ms = 0;
};

class MasterStore {
 public:
  class Txn;

  // Opens or creates the store in options.dir. Errors: IOError (directory, LMDB, or the
  // directory is in use by another process or another MasterStore of this process),
  // Corruption (a record fails its checks or the format is newer than this program's).
  static Result<std::unique_ptr<MasterStore>> Open(const MasterStoreOptions& options);
  // Closes the environment. REQUIRES: no call is running on another thread.
  ~MasterStore();
  MasterStore(const MasterStore&) = delete;
  MasterStore& operator=(const MasterStore&) = delete;

  // Runs `fn` in one write transaction and commits it when fn returns OK; when fn (or the
  // commit) fails nothing of it is kept and its error is returned. When the LMDB map is full
  // the transaction is aborted, the map doubled and fn run again from the start, so fn must
  // reset whatever it writes outside the transaction at its beginning. The Txn is valid only
  // during the call. fn must not call other MasterStore methods (it would deadlock).
  Status Update(const std::function<Status(Txn& txn)>& fn);

  // The ACG of each file (0 = not mapped), in order, into *acgs, and (optional) each
  // mapping's generation into *generations. Errors: LMDB failures, Corruption.
  Status LookupFiles(const std::vector<FileId>& files, std::vector<uint64_t>* acgs,
                     std::vector<uint64_t>* generations = nullptr) const;

  // The files mapped to `acg` (committed state), in key order. Reads the whole `files`
  // database: O(all files); for rare repairs only (Master::SplitDone).
  Status FilesOf(uint64_t acg, std::vector<FileId>* files) const;

  // Copies of the in-memory tables (committed state).
  std::optional<AcgRecord> GetAcg(uint64_t acg) const;
  std::map<uint64_t, AcgRecord> Acgs() const;
  // Calls fn for every ACG of the committed table, in id order, under the table's read lock:
  // fn must not call into the store. Returns the mirror_version() of what fn saw.
  uint64_t ForEachAcg(const std::function<void(uint64_t acg, const AcgRecord& rec)>& fn) const;
  // Changes with every committed write transaction (the committed tables above may differ
  // between two values, and are the same while it stays): for caches of what they imply.
  uint64_t mirror_version() const;
  // The app's current ACG for placement, 0 when none.
  uint64_t AppAcg(std::string_view app) const;
  std::map<uint32_t, std::string> Nodes() const;  // node id -> endpoint
  std::map<std::string, IndexType> Indexes() const;
  std::map<uint32_t, std::string> Volumes() const;  // volume id -> root
  uint64_t FileCount() const;  // entries in `files`
  uint64_t map_bytes() const;  // current LMDB map size

  // Reads every table from LMDB (not from the mirrors), checking each record.
  Result<StoreDump> Dump() const;

 private:
  struct Mirror {
    std::map<uint64_t, AcgRecord> acgs;
    std::map<std::string, uint64_t, std::less<>> apps;
    std::map<uint32_t, std::string> nodes;
    std::map<std::string, IndexType, std::less<>> indexes;
    std::map<uint32_t, std::string> volumes;
    std::map<std::string, uint32_t, std::less<>> volume_by_root;
    uint64_t next_acg = 1;
    uint64_t next_node = 1;
    uint64_t next_volume = 1;
    uint64_t files = 0;
  };
  friend class Txn;

  explicit MasterStore(const MasterStoreOptions& options);
  Status OpenEnv();
  Status LoadMirror();
  Status ReadAll(MDB_txn* txn, Mirror* mirror, std::map<FileId, uint64_t>* files) const;
  Status GrowMap();

  // Constant after Open.
  const MasterStoreOptions options_;
  int lock_fd_ = -1;  // holds the flock on <dir>/LOCK
  std::thread syncer_;  // with !sync and sync_interval_ms > 0
  std::mutex syncer_mu_;
  std::condition_variable syncer_cv_;
  bool syncer_stop_ = false;  // Under syncer_mu_.
  MDB_env* env_ = nullptr;
  MDB_dbi files_dbi_ = 0, acgs_dbi_ = 0, apps_dbi_ = 0, nodes_dbi_ = 0, indexes_dbi_ = 0,
          volumes_dbi_ = 0, meta_dbi_ = 0;

  std::mutex write_mu_;  // serialises Update()
  // Shared by every LMDB transaction, exclusive while the map grows (LMDB requires that no
  // transaction is live then).
  mutable std::shared_mutex env_mu_;
  uint64_t map_bytes_ = 0;  // Under env_mu_ (written exclusively).
  // The committed small tables. Written under write_mu_ + exclusive mirror_mu_, so Update's
  // own thread may read them holding write_mu_ alone.
  mutable std::shared_mutex mirror_mu_;
  Mirror mirror_;
  uint64_t mirror_version_ = 0;  // Under mirror_mu_ (written exclusively, with mirror_).
};

// One write transaction of MasterStore::Update. Reads see the transaction's own writes.
// Every method returns LMDB errors (ResourceExhausted when the map is full: Update retries).
class MasterStore::Txn {
 public:
  // ---- files
  // The ACG of `file`, 0 when not mapped.
  Result<uint64_t> FileAcg(FileId file);
  // The mapping of `file` ({0, 0} when not mapped).
  Result<FileMapping> Mapping(FileId file);
  // Maps `file` to `acg`, moving it (and its count) from any ACG it was in. A mapping to
  // another ACG, a new one, or any mapping with `renew` gets this transaction's generation;
  // an unchanged mapping keeps its own. *generation (optional) receives the mapping's
  // generation. InvalidArgument when `acg` does not exist.
  Status MapFile(FileId file, uint64_t acg, bool renew = false, uint64_t* generation = nullptr);
  // Moves `file` from ACG `from` to ACG `to` keeping its generation (a split moved it: it is
  // the same mapping), only while it is mapped to `from`; *moved (optional) says whether it
  // was. InvalidArgument when `to` does not exist.
  Status MoveFile(FileId file, uint64_t from, uint64_t to, bool* moved = nullptr);
  // Removes the mapping of `file`; *was_mapped (optional) says whether there was one. With
  // `only_generation` set, a mapping of another generation is left alone (*was_mapped false).
  Status UnmapFile(FileId file, bool* was_mapped = nullptr,
                   std::optional<uint64_t> only_generation = std::nullopt);
  // This transaction's generation (the id of its LMDB write transaction; never 0).
  uint64_t generation() const;

  // ---- acgs
  // The ACG's record, or null. The pointer is valid until the next call on this Txn.
  const AcgRecord* FindAcg(uint64_t acg) const;
  // Creates an empty ACG on `node_id` tagged `app` and returns its new id (never reused).
  Result<uint64_t> CreateAcg(uint32_t node_id, std::string_view app);
  // Marks `acg` retired. InvalidArgument when it does not exist.
  Status RetireAcg(uint64_t acg);
  // Makes `node_id` the owner of `acg` (a migration). InvalidArgument when it does not exist.
  Status SetAcgNode(uint64_t acg, uint32_t node_id);
  // Calls fn for every ACG (committed and created in this transaction), by id.
  void ForEachAcg(const std::function<void(uint64_t acg, const AcgRecord& rec)>& fn) const;

  // ---- apps
  // The app's current ACG for placement, 0 when none. InvalidArgument for a tag longer than
  // kMaxAppBytes (SetAppAcg).
  uint64_t AppAcg(std::string_view app) const;
  Status SetAppAcg(std::string_view app, uint64_t acg);

  // ---- nodes
  // The node's endpoint, or null (valid until the next call on this Txn).
  const std::string* FindNode(uint32_t node_id) const;
  // A new node id (never reused). ResourceExhausted after 2^32 - 1 ids.
  Result<uint32_t> NewNodeId();
  // Creates or updates a node; ids handed out later are above node_id.
  Status PutNode(uint32_t node_id, std::string_view endpoint);

  // ---- indexes
  std::optional<IndexType> FindIndex(std::string_view name) const;
  Status PutIndex(std::string_view name, IndexType type);
  Status DeleteIndex(std::string_view name);

  // ---- volumes
  // The id of the volume with this root, or 0.
  uint32_t FindVolume(std::string_view root) const;
  // Registers `root` under a new id and returns it. REQUIRES: FindVolume(root) == 0.
  Result<uint32_t> AddVolume(std::string_view root);
  // Forgets volume `volume` and unmaps every file of it (ACG counts follow); *unmapped
  // receives how many. NotFound when it is not registered.
  Status RemoveVolume(uint32_t volume, uint64_t* unmapped);
  bool HasVolume(uint32_t volume) const;

 private:
  friend class MasterStore;
  Txn(MasterStore* store, MDB_txn* txn) : store_(store), txn_(txn) {}
  // Writes the dirty small tables into LMDB (before commit).
  Status Flush();
  // Folds the dirty tables into the committed mirror (after commit).
  void Publish(Mirror* mirror);
  AcgRecord* MutableAcg(uint64_t acg);

  MasterStore* const store_;
  MDB_txn* const txn_;
  bool map_full_ = false;  // an LMDB call returned MDB_MAP_FULL: Update grows and retries
  const Mirror& base() const { return store_->mirror_; }
  Status Check(int rc, std::string_view what);
  // Changes made by this transaction; nullopt = deleted.
  std::map<uint64_t, AcgRecord> acgs_;
  std::map<std::string, uint64_t, std::less<>> apps_;
  std::map<uint32_t, std::string> nodes_;
  std::map<std::string, std::optional<IndexType>, std::less<>> indexes_;
  std::map<uint32_t, std::string> volumes_;
  std::set<uint32_t> removed_volumes_;
  std::optional<uint64_t> next_acg_, next_node_, next_volume_;
  int64_t files_delta_ = 0;
};

}  // namespace propeller::master

#endif  // PROPELLER_MASTER_STORE_H_
