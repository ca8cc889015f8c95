#include "common/lmdb_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/env.h"

namespace propeller {
namespace {

// LMDB 0.9's format (mdb.c): see the header.
constexpr uint32_t kMagic = 0xBEEFC0DE;
constexpr uint32_t kDataVersion = 1;
constexpr size_t kPageHeader = 16;  // mp_pgno (8), mp_pad (2), mp_flags (2), lower (2), upper (2)
constexpr size_t kNodeHeader = 8;   // mn_lo, mn_hi, mn_flags, mn_ksize (2 each)
constexpr size_t kDbSize = 48;      // MDB_db
constexpr size_t kMetaOffset = kPageHeader;  // MDB_meta follows the page header
constexpr uint16_t kBranch = 0x01, kLeaf = 0x02, kOverflow = 0x04, kMeta = 0x08;
// Transient flags LMDB clears before writing a page; tolerated if found.
constexpr uint16_t kTransient = 0x10 | 0x4000 | 0x8000;  // P_DIRTY, P_LOOSE, P_KEEP
constexpr uint16_t kBigData = 0x01, kSubData = 0x02, kDupData = 0x04;
constexpr uint16_t kIntegerKey = 0x08;  // MDB_INTEGERKEY (md_flags)
constexpr uint64_t kNoPage = ~uint64_t{0};  // P_INVALID: an empty database
constexpr int kMaxDepth = 32;               // CURSOR_STACK

uint16_t U16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint32_t U32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint64_t U64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct Db {
  uint32_t pad = 0;  // the page size, in the free database of a meta page
  uint16_t flags = 0;
  uint16_t depth = 0;
  uint64_t branch_pages = 0, leaf_pages = 0, overflow_pages = 0;
  uint64_t entries = 0;
  uint64_t root = kNoPage;
};

Db ReadDb(const char* p) {
  Db d;
  d.pad = U32(p);
  d.flags = U16(p + 4);
  d.depth = U16(p + 6);
  d.branch_pages = U64(p + 8);
  d.leaf_pages = U64(p + 16);
  d.overflow_pages = U64(p + 24);
  d.entries = U64(p + 32);
  d.root = U64(p + 40);
  return d;
}

// What a walk of one database found, to compare with what its MDB_db record says.
struct Counts {
  uint64_t branch_pages = 0, leaf_pages = 0, overflow_pages = 0, entries = 0;
};

struct Meta {
  Db dbs[2];
  uint64_t last_page = 0;
  uint64_t txnid = 0;
};

// LMDB's default key order: bytes, then length.
int CompareKeys(std::string_view a, std::string_view b) {
  const int c = std::memcmp(a.data(), b.data(), std::min(a.size(), b.size()));
  if (c != 0) return c;
  return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}

class Checker {
 public:
  Checker(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  Status Run(bool deep, LmdbCheckStats* stats) {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Status::IOError("stat " + path_, errno);
    file_size_ = static_cast<uint64_t>(st.st_size);
    if (file_size_ == 0) return Status::OK();  // a new environment: LMDB writes it
    Meta metas[2];
    std::string buf;
    PROPELLER_RETURN_IF_ERROR(ReadAt(0, kMetaOffset + 152, &buf, "meta page 0"));
    PROPELLER_RETURN_IF_ERROR(ParseMeta(buf, 0, &metas[0]));
    psize_ = metas[0].dbs[0].pad;
    PROPELLER_RETURN_IF_ERROR(ReadAt(psize_, kMetaOffset + 152, &buf, "meta page 1"));
    PROPELLER_RETURN_IF_ERROR(ParseMeta(buf, 1, &metas[1]));
    if (metas[1].dbs[0].pad != psize_) {
      return Fail("the two meta pages disagree on the page size");
    }
    const Meta& m = metas[1].txnid > metas[0].txnid ? metas[1] : metas[0];
    last_page_ = m.last_page;
    if (stats != nullptr) stats->last_page = last_page_;
    if (last_page_ < 1) return Fail("the meta page's last page is " + std::to_string(last_page_));
    const uint64_t need = (last_page_ + 1) * psize_;
    if (last_page_ > (uint64_t{1} << 40) || need > file_size_) {
      return Fail("the file is " + std::to_string(file_size_) + " bytes but its meta page " +
                  "says it holds " + std::to_string(last_page_ + 1) + " pages of " +
                  std::to_string(psize_) + " bytes (" + std::to_string(need) +
                  " bytes): truncated or damaged");
    }
    for (int i = 0; i < 2; ++i) {
      const uint64_t root = m.dbs[i].root;
      if (root != kNoPage && (root < 2 || root > last_page_)) {
        return Fail(std::string(i == 0 ? "free" : "main") + " database root page " +
                    std::to_string(root) + " is outside the file");
      }
    }
    if (!deep) return Status::OK();
    seen_.assign(last_page_ + 1, false);
    PROPELLER_RETURN_IF_ERROR(WalkTree(m.dbs[0], "the free list"));
    PROPELLER_RETURN_IF_ERROR(WalkTree(m.dbs[1], "the main database"));
    if (stats != nullptr) {
      stats->pages = pages_;
      stats->branch_pages = std::move(branch_pages_);
      stats->leaf_pages = std::move(leaf_pages_);
    }
    return Status::OK();
  }

 private:
  Status Fail(const std::string& what) const {
    return Status::Corruption("LMDB data file " + path_ + ": " + what);
  }
  Status FailPage(uint64_t pgno, const std::string& what) const {
    return Fail("page " + std::to_string(pgno) + ": " + what);
  }

  Status ReadAt(uint64_t offset, size_t n, std::string* out, const char* what) {
    out->resize(n);
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd_, out->data() + got, n - got, static_cast<off_t>(offset + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        return Status::IOError("reading " + path_, errno);
      }
      if (r == 0) return Fail(std::string(what) + " lies past the end of the file");
      got += static_cast<size_t>(r);
    }
    return Status::OK();
  }

  Status ParseMeta(const std::string& b, int i, Meta* m) {
    const std::string which = "meta page " + std::to_string(i);
    if ((U16(b.data() + 10) & ~kTransient) != kMeta) return Fail(which + " is not a meta page");
    const char* p = b.data() + kMetaOffset;
    if (U32(p) != kMagic) return Fail(which + " has no LMDB magic number");
    if (U32(p + 4) != kDataVersion) {
      return Fail(which + " has format version " + std::to_string(U32(p + 4)) + ", not " +
                  std::to_string(kDataVersion));
    }
    m->dbs[0] = ReadDb(p + 24);
    m->dbs[1] = ReadDb(p + 24 + kDbSize);
    m->last_page = U64(p + 24 + 2 * kDbSize);
    m->txnid = U64(p + 24 + 2 * kDbSize + 8);
    const uint32_t ps = m->dbs[0].pad;
    if (ps < 512 || ps > 65536 || (ps & (ps - 1)) != 0) {
      return Fail(which + " gives a page size of " + std::to_string(ps));
    }
    return Status::OK();
  }

  // Walks database `db` and compares what it holds with what its record says: a subtree
  // that a damaged key count or pointer cut off is missing from the counts.
  Status WalkTree(const Db& db, const std::string& name) {
    Counts found;
    if (db.root != kNoPage) {
      if (db.depth == 0 || db.depth > kMaxDepth) {
        return Fail(name + " has depth " + std::to_string(db.depth));
      }
      PROPELLER_RETURN_IF_ERROR(
          WalkPage(db.root, db.depth, (db.flags & kIntegerKey) != 0, name, &found));
    }
    if (found.branch_pages != db.branch_pages || found.leaf_pages != db.leaf_pages ||
        found.overflow_pages != db.overflow_pages || found.entries != db.entries) {
      return Fail(name + " holds " + std::to_string(found.entries) + " entries in " +
                  std::to_string(found.branch_pages) + "/" + std::to_string(found.leaf_pages) +
                  "/" + std::to_string(found.overflow_pages) +
                  " branch/leaf/overflow pages, but its record says " +
                  std::to_string(db.entries) + " in " + std::to_string(db.branch_pages) + "/" +
                  std::to_string(db.leaf_pages) + "/" + std::to_string(db.overflow_pages));
    }
    return Status::OK();
  }

  // Marks `pgno` (and `count` - 1 pages after it) read; false when one was reached before.
  bool Claim(uint64_t pgno, uint64_t count) {
    for (uint64_t p = pgno; p < pgno + count; ++p) {
      if (seen_[p]) return false;
      seen_[p] = true;
    }
    ++pages_;
    return true;
  }

  Status WalkPage(uint64_t pgno, int depth, bool integer_keys, const std::string& name,
                  Counts* counts) {
    if (pgno < 2 || pgno > last_page_) {
      return Fail(name + " points to page " + std::to_string(pgno) + ", outside the file");
    }
    if (!Claim(pgno, 1)) return FailPage(pgno, "reached twice (a cycle or a shared page)");
    std::string page;
    PROPELLER_RETURN_IF_ERROR(ReadAt(pgno * psize_, psize_, &page, "a page"));
    const char* p = page.data();
    if (U64(p) != pgno) {
      return FailPage(pgno, "its header says it is page " + std::to_string(U64(p)));
    }
    const uint16_t flags = U16(p + 10) & ~kTransient;
    const bool branch = flags == kBranch;
    if (!branch && flags != kLeaf) {
      return FailPage(pgno, "flags " + std::to_string(flags) + " in " + name +
                                " (neither a branch nor a leaf page)");
    }
    if (branch == (depth == 1)) {
      return FailPage(pgno, std::string(branch ? "a branch" : "a leaf") + " page at depth " +
                                std::to_string(depth) + " of " + name);
    }
    const uint16_t lower = U16(p + 12);
    const uint16_t upper = U16(p + 14);
    if (lower < kPageHeader || lower > upper || upper > psize_ || (lower - kPageHeader) % 2 != 0) {
      return FailPage(pgno, "bad free-space bounds " + std::to_string(lower) + ".." +
                                std::to_string(upper));
    }
    const size_t n = (lower - kPageHeader) / 2;
    if (branch && n == 0) return FailPage(pgno, "a branch page without keys");
    (branch ? branch_pages_ : leaf_pages_).push_back(pgno);
    ++(branch ? counts->branch_pages : counts->leaf_pages);
    if (!branch) counts->entries += n;
    std::string_view prev;
    for (size_t i = 0; i < n; ++i) {
      const size_t off = U16(p + kPageHeader + 2 * i);
      if (off < upper || off + kNodeHeader > psize_) {
        return FailPage(pgno, "node " + std::to_string(i) + " at offset " + std::to_string(off) +
                                  " lies outside the page's node area");
      }
      const char* node = p + off;
      const uint32_t lo_hi = U16(node) | (uint32_t{U16(node + 2)} << 16);
      const uint16_t nflags = U16(node + 4);
      const size_t ksize = U16(node + 6);
      const size_t key_end = off + kNodeHeader + ksize;
      if (key_end > psize_) return FailPage(pgno, "node " + std::to_string(i) + "'s key overruns");
      const std::string_view key(node + kNodeHeader, ksize);
      // A branch page's first key is empty (it stands for everything below the second).
      if (!integer_keys && !(branch && i == 0)) {
        if (i > (branch ? 1u : 0u) && CompareKeys(prev, key) >= 0) {
          return FailPage(pgno, "keys out of order at node " + std::to_string(i) + " of " + name);
        }
        prev = key;
      }
      if (branch) {
        const uint64_t child = lo_hi | (uint64_t{nflags} << 32);
        PROPELLER_RETURN_IF_ERROR(WalkPage(child, depth - 1, integer_keys, name, counts));
        continue;
      }
      const size_t dsize = lo_hi;
      if (nflags & kDupData) return FailPage(pgno, "sorted duplicates in " + name);
      if (nflags & kBigData) {
        if (key_end + 8 > psize_) return FailPage(pgno, "an overflow reference overruns");
        PROPELLER_RETURN_IF_ERROR(
            CheckOverflow(U64(node + kNodeHeader + ksize), dsize, name, counts));
        continue;
      }
      if (key_end + dsize > psize_) {
        return FailPage(pgno, "node " + std::to_string(i) + "'s data overruns the page");
      }
      if (nflags & kSubData) {
        if (dsize != kDbSize) return FailPage(pgno, "a database record of the wrong size");
        const Db sub = ReadDb(node + kNodeHeader + ksize);
        PROPELLER_RETURN_IF_ERROR(WalkTree(sub, "database '" + std::string(key) + "'"));
      }
    }
    return Status::OK();
  }

  Status CheckOverflow(uint64_t pgno, size_t dsize, const std::string& name, Counts* counts) {
    if (pgno < 2 || pgno > last_page_) {
      return Fail(name + " points to overflow page " + std::to_string(pgno) + ", outside the file");
    }
    std::string head;
    PROPELLER_RETURN_IF_ERROR(ReadAt(pgno * psize_, kPageHeader, &head, "an overflow page"));
    if (U64(head.data()) != pgno || (U16(head.data() + 10) & ~kTransient) != kOverflow) {
      return FailPage(pgno, "not the overflow page " + name + " points to");
    }
    const uint64_t count = U32(head.data() + 12);
    if (count == 0 || pgno + count - 1 > last_page_ || dsize + kPageHeader > count * psize_) {
      return FailPage(pgno, "an overflow run of " + std::to_string(count) +
                                " pages that does not fit its data or the file");
    }
    if (!Claim(pgno, count)) return FailPage(pgno, "an overflow run reached twice");
    counts->overflow_pages += count;
    return Status::OK();
  }

  const int fd_;
  const std::string path_;
  uint64_t file_size_ = 0;
  uint64_t psize_ = 0;
  uint64_t last_page_ = 0;
  uint64_t pages_ = 0;
  std::vector<bool> seen_;
  std::vector<uint64_t> branch_pages_, leaf_pages_;
};

}  // namespace

Status CheckLmdbFile(const std::string& path, bool deep, LmdbCheckStats* stats) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::IOError("opening " + path, errno);
  Checker checker(fd, path);
  Status s = checker.Run(deep, stats);
  ::close(fd);
  return s;
}

namespace {

// "<size> <mtime seconds> <mtime nanoseconds>" of `path`, or "" when it cannot be read.
std::string MarkOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + " " +
         std::to_string(st.st_mtim.tv_nsec) + "\n";
}

}  // namespace

Status WriteLmdbFileMark(const std::string& data_path, const std::string& mark_path) {
  const std::string mark = MarkOf(data_path);
  if (mark.empty()) return Status::IOError("stat " + data_path, errno);
  return WriteFileAtomically(Env::Default(), mark_path, mark);
}

bool LmdbFileMatchesMark(const std::string& data_path, const std::string& mark_path) {
  std::string mark;
  if (!ReadFileToString(Env::Default(), mark_path, &mark).ok()) return false;
  const std::string now = MarkOf(data_path);
  return !now.empty() && now == mark;
}

}  // namespace propeller
