#define FUSE_USE_VERSION 314
#include "client/fuse/capture_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <fuse3/fuse_lowlevel.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/fuse/errno_map.h"
#include "client/fuse/index_writer.h"
#include "client/fuse/kernel_io.h"
#include "client/fuse/process_table.h"
#include "client/fuse/query_listings.h"
#include "common/logging.h"
#include "common/query/query.h"
#include "common/record.h"
#include "common/tree_walk.h"

namespace propeller::fuse {
namespace {

int64_t MonoNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t WallNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsQueryName(const char* name) { return name[0] == '?'; }

// True unless the open file `fd` certainly has no user.* extended attribute. One flistxattr
// into a stack buffer: most files have none (or only security.* / system.* ones).
bool HasUserName(const char* names, ssize_t n) {
  if (n < 0) return errno != ENOTSUP;  // ERANGE: a long list; read it the slow way
  for (ssize_t off = 0; off < n;) {
    const char* name = names + off;
    const size_t len = ::strnlen(name, static_cast<size_t>(n - off));
    if (len >= 5 && std::memcmp(name, "user.", 5) == 0) return true;
    off += static_cast<ssize_t>(len) + 1;
  }
  return false;
}
bool MayHaveUserXattrs(int fd) {
  char names[1024];
  return HasUserName(names, ::flistxattr(fd, names, sizeof(names)));
}
// The same for the file at absolute path `abs` (not following a symlink).
bool MayHaveUserXattrsAt(const std::string& abs) {
  char names[1024];
  return HasUserName(names, ::llistxattr(abs.c_str(), names, sizeof(names)));
}

// `name` in directory `parent` (an in-volume or an absolute path).
std::string ChildPath(const std::string& parent, const char* name) {
  return parent == "/" ? "/" + std::string(name) : parent + "/" + name;
}

}  // namespace

std::string EncodeEntryName(std::string_view rel) {
  std::string out;
  out.reserve(rel.size() + 8);
  for (char c : rel) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

bool DecodeEntryName(std::string_view name, std::string* rel) {
  rel->clear();
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%') {
      if (name[i] == '/') return false;
      *rel += name[i];
      continue;
    }
    if (i + 2 >= name.size()) return false;
    std::string_view esc = name.substr(i + 1, 2);
    if (esc == "25") {
      *rel += '%';
    } else if (esc == "2F") {
      *rel += '/';
    } else {
      return false;
    }
    i += 2;
  }
  return !rel->empty();
}

class CaptureFs::Impl {
 public:
  enum class Kind : uint8_t { kFile, kQueryDir, kQueryEntry };

  struct Inode;
  struct Link {
    Inode* dir = nullptr;
    std::string name;
  };

  struct Inode {
    Kind kind = Kind::kFile;
    dev_t dev = 0;
    ino_t ino = 0;
    uint64_t nlookup = 0;   // the kernel's references. Under Impl::mu_.
    uint64_t children = 0;  // links of other inodes into this one. Under Impl::mu_.
    // The names the inode is known by: (directory, name) pairs seen by lookups and kept up to
    // date by rename, link and unlink. A directory has one; a file with hard links may have
    // several; none when every known name was removed (an open, unlinked file). kQueryDir:
    // its scope directory; kQueryEntry: its query directory. Each link keeps its directory
    // alive (`children`). Under Impl::mu_.
    std::vector<Link> links;
    Inode* parent() const { return links.empty() ? nullptr : links.front().dir; }
    // Virtual inodes (query directories and their entries).
    std::string vkey;        // key in virtual_
    uint64_t vino = 0;       // st_ino shown for it
    std::string query;       // kQueryDir
    QueryListings listings;  // kQueryDir: each recent caller's last listing
    // Kernel passthrough (KernelPassthrough): the backing id every open of this inode names
    // while `backing_opens` handles use it (the kernel requires one id per inode). Under
    // Impl::backing_mu_.
    int32_t backing_id = 0;
    uint32_t backing_opens = 0;
  };

  // An open file or directory.
  struct Handle {
    int fd = -1;
    bool write = false;
    bool passthrough = false;  // holds one of inode->backing_opens
    bool has_owner = false;
    ProcessInfo owner;
    uint64_t open_mark = 0;  // ProcessTable::OnOpen's mark of this open
    Inode* inode = nullptr;
    // Directories.
    DIR* dir = nullptr;
    struct dirent* entry = nullptr;
    off_t offset = 0;
    // Query directories: a snapshot of the listing.
    std::vector<QueryEntry> entries;
  };

  explicit Impl(const CaptureFsOptions& o)
      : options_(o),
        processes_("/proc", o.edge_flush_interval_ms * 1'000'000),
        passthrough_(o.passthrough && !o.writeback) {}

  ~Impl() {
    StopFlusher();
    if (session_ != nullptr) {
      if (mounted_) fuse_session_unmount(session_);
      fuse_session_destroy(session_);
    }
  }

  Status Init() {
    struct stat st;
    if (::stat(options_.backing.c_str(), &st) != 0) {
      return Status::IOError("opening " + options_.backing + ": " + std::strerror(errno));
    }
    root_.dev = st.st_dev;
    root_.ino = st.st_ino;
    root_.nlookup = 2;
    backing_prefix_ = options_.backing == "/" ? "" : options_.backing;
    // Modes arrive masked by the kernel; the daemon's own umask must not mask them again.
    ::umask(0);
    am_root_ = ::geteuid() == 0;
    return Status::OK();
  }

  Status MountSession() {
    std::vector<std::string> args = {"propeller", "-o", "fsname=propeller:" + options_.backing,
                                     "-o", "subtype=propeller", "-o", "default_permissions"};
    if (options_.allow_other) {
      args.push_back("-o");
      args.push_back("allow_other");
    }
    if (options_.debug) args.push_back("-d");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    struct fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
    static const fuse_lowlevel_ops ops = MakeOps();
    session_ = fuse_session_new(&fargs, &ops, sizeof(ops), this);
    fuse_opt_free_args(&fargs);
    if (session_ == nullptr) return Status::IOError("fuse_session_new failed (see stderr)");
    if (fuse_session_mount(session_, options_.mountpoint.c_str()) != 0) {
      return Status::IOError("mounting at " + options_.mountpoint +
                             " failed (needs /dev/fuse and root, or user_allow_other for "
                             "allow_other; see stderr)");
    }
    mounted_ = true;
    dev_fd_ = fuse_session_fd(session_);
    // Our read and writev on /dev/fuse, for FUSE_HANDLE_KILLPRIV_V2 and kernel passthrough
    // (kernel_io.h), and for the polling reader, whose requests and replies go through its
    // own clone of the device (t_dev_fd). Without them the mount works the same, with a
    // GETXATTR round trip before every write, every read and write going through the daemon,
    // and the poller reading the session's device like one more worker.
    static const fuse_custom_io io = {.writev = &DevWritev, .read = &DevRead};
    if (fuse_session_custom_io(session_, &io, dev_fd_) != 0) {
      Log(LogLevel::kWarning, "fuse: custom /dev/fuse I/O refused; writes take an extra round "
                              "trip each (security.capability) and no kernel passthrough");
    }
    flusher_ = std::thread([this] { FlusherMain(); });
    return Status::OK();
  }

  static ssize_t DevRead(int fd, void* buf, size_t len, void* userdata) {
    const ssize_t n = ::read(t_dev_fd >= 0 ? t_dev_fd : fd, buf, len);
    if (n > 0) {
      Impl* self = static_cast<Impl*>(userdata);
      self->killpriv_.OnRequest(buf, static_cast<size_t>(n));
      self->passthrough_.OnRequest(buf, static_cast<size_t>(n));
    }
    return n;
  }

  static ssize_t DevWritev(int fd, struct iovec* iov, int count, void* userdata) {
    Impl* self = static_cast<Impl*>(userdata);
    self->killpriv_.OnReply(iov, count);
    if (self->passthrough_.OnReply(iov, count)) {
      Log(LogLevel::kInfo, "fuse: kernel passthrough on: reads and writes of open files go to "
                           "the backing files without the daemon");
    }
    return ::writev(t_dev_fd >= 0 ? t_dev_fd : fd, iov, count);
  }

  // ---- the polling reader ----
  //
  // Each FUSE request is two hand-offs between threads: the caller's wakes a daemon thread,
  // the reply wakes the caller. Where waking an idle CPU is slow (virtual machines: a halted
  // vCPU waits for its host), those wake-ups are most of a round trip: on the 2-vCPU machine
  // of bench/results/postmark-poll-20261126/, a serial create loop on libfuse's passthrough_ll
  // ran 1.6-2.8x faster with it and its caller pinned to one CPU. One thread, the poller, keeps
  // reading the device without sleeping for options_.poll_us after each request it served, so
  // a caller that issues calls back to back (cp, tar, make, PostMark) finds it awake and the
  // first hand-off costs no wake-up. Past that window it sleeps in poll(2); the libfuse
  // workers serve whatever it does not take, so concurrency is unchanged.
  //
  // It reads through its own clone of the device (FUSE_DEV_IOC_CLONE), non-blocking, and
  // answers through that clone: the kernel looks a reply up among the requests read from the
  // device it is written to. Every reply is sent by the thread that read its request (no
  // handler answers later from another thread), so DevRead and DevWritev only need to know
  // which thread they run on (t_dev_fd).
  static inline thread_local int t_dev_fd = -1;

  // Opens the poller's clone of the device; -1 (logged) when the kernel refuses.
  int ClonePollerDevice() {
    const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      Log(LogLevel::kWarning, "fuse: no polling reader: opening /dev/fuse: %s",
          std::strerror(errno));
      return -1;
    }
    uint32_t session_fd = static_cast<uint32_t>(dev_fd_);
    if (::ioctl(fd, FUSE_DEV_IOC_CLONE, &session_fd) != 0) {
      Log(LogLevel::kWarning, "fuse: no polling reader: cloning the device: %s",
          std::strerror(errno));
      ::close(fd);
      return -1;
    }
    return fd;
  }

  void PollerMain(int fd) {
    t_dev_fd = fd;
    const int64_t window_ns = options_.poll_us * 1000;
    struct fuse_buf buf = {};
    int64_t last = MonoNanos();
    while (!fuse_session_exited(session_)) {
      const int r = fuse_session_receive_buf(session_, &buf);
      if (r > 0) {
        fuse_session_process_buf(session_, &buf);
        ++polled_requests_;
        last = MonoNanos();
        continue;
      }
      if (r == 0) break;  // the session ended (unmounted, aborted)
      if (r != -EAGAIN && r != -EINTR) {
        Log(LogLevel::kWarning, "fuse: polling reader stops: %s", std::strerror(-r));
        break;
      }
      if (MonoNanos() - last < window_ns) continue;
      // Idle for a whole window: sleep until a request comes (another thread may take it)
      // or 200 ms pass (to notice the end of the session).
      struct pollfd pfd = {fd, POLLIN, 0};
      (void)::poll(&pfd, 1, 200);
      last = MonoNanos();
    }
    std::free(buf.mem);
    t_dev_fd = -1;
    ::close(fd);
  }

  // Kernel passthrough for the open `h` of a regular file (descriptor h->fd, mode `mode`)
  // by the caller of `req`: the reply to the OPEN or CREATE being served will name the
  // inode's backing id, registered now unless other handles use one already. Without
  // passthrough (not negotiated, --writeback, or registration failed once: the backing file
  // system is stacked, or the kernel refused it at INIT) the handle is served through the
  // daemon as before. 0, or an errno for the open.
  //
  // Set-ID files stay with the daemon. With KILLPRIV_V2 the kernel leaves dropping set-user-ID
  // and set-group-ID on write to the daemon (the WRITE request's flag), and a passthrough
  // write sends no WRITE: the bits would stay (Linux 6.18 drops the kernel's own attempt).
  // An inode already open in passthrough mode cannot be opened otherwise (the kernel fails
  // the open with EIO), so a write-open of a set-ID file that must join one drops the bits
  // now, by the rule a write would apply: earlier than the VFS (at open, not at the first
  // write), never more.
  int AttachBacking(fuse_req_t req, Handle* h, mode_t mode) {
    if (!passthrough_.enabled()) return 0;
    const bool set_id = (mode & (S_ISUID | S_ISGID)) != 0;
    std::lock_guard<std::mutex> lock(backing_mu_);
    Inode* inode = h->inode;
    if (inode->backing_opens == 0) {
      // An inode without open handles may still be in passthrough mode in the kernel until
      // the RELEASE of its last handle; that release made backing_opens 0, so a new id is
      // fine: the kernel dropped the old one from the inode before sending RELEASE.
      if (set_id || passthrough_failed_) return 0;
      const int32_t id = KernelPassthrough::OpenBacking(dev_fd_, h->fd);
      if (id < 0) {
        passthrough_failed_ = true;
        Log(LogLevel::kWarning, "fuse: kernel passthrough refused (%s); this mount now serves "
                                "reads and writes through the daemon",
            std::strerror(-id));
        return 0;
      }
      inode->backing_id = id;
    } else if (set_id && h->write && fuse_req_ctx(req)->uid != 0) {
      if (const int err = KillPrivileges(req, h->fd, ""); err != 0) return err;
    }
    ++inode->backing_opens;
    h->passthrough = true;
    KernelPassthrough::SetReplyBacking(inode->backing_id);
    ++passthrough_opens_;
    return 0;
  }

  // Gives up the handle's share of its inode's backing id (the last one drops the id).
  void DetachBacking(Handle* h) {
    if (!h->passthrough) return;
    h->passthrough = false;
    std::lock_guard<std::mutex> lock(backing_mu_);
    Inode* inode = h->inode;
    if (--inode->backing_opens > 0) return;
    if (int rc = KernelPassthrough::CloseBacking(dev_fd_, inode->backing_id); rc != 0) {
      Log(LogLevel::kWarning, "fuse: dropping backing id %d: %s", inode->backing_id,
          std::strerror(-rc));
    }
    inode->backing_id = 0;
  }

  // Closes an open file's handle (RELEASE, or an OPEN or CREATE reply the kernel never got).
  void CloseHandle(Handle* h) {
    DetachBacking(h);
    ::close(h->fd);
    delete h;
  }

  // Drops set-user-ID and set-group-ID from the regular file open as `fd` (or at `abs` when
  // fd < 0) as the VFS would for the caller of `req` (KilledMode), because the kernel asked
  // (KillprivV2). 0 or an errno.
  static int KillPrivileges(fuse_req_t req, int fd, const std::string& abs) {
    struct stat st;
    if ((fd >= 0 ? ::fstat(fd, &st) : ::lstat(abs.c_str(), &st)) != 0) return errno;
    if (!S_ISREG(st.st_mode)) return 0;
    const mode_t mode = st.st_mode & 07777;
    const mode_t killed = static_cast<mode_t>(KilledMode(mode, CallerInGroup(req, st.st_gid)));
    if (killed == mode) return 0;
    const int rc = fd >= 0 ? ::fchmod(fd, killed) : ::chmod(abs.c_str(), killed);
    return rc == 0 ? 0 : errno;
  }

  // Whether the caller of `req` is root or in group `gid` (primary or supplementary). When the
  // groups cannot be read, no: the set-group-ID bit then goes, the safe side.
  static bool CallerInGroup(fuse_req_t req, gid_t gid) {
    const struct fuse_ctx* ctx = fuse_req_ctx(req);
    if (ctx->uid == 0 || ctx->gid == gid) return true;
    gid_t groups[64];
    const int n = fuse_req_getgroups(req, 64, groups);
    for (int i = 0; i < std::min(n, 64); ++i) {
      if (groups[i] == gid) return true;
    }
    return false;
  }

  Status Run() {
    struct fuse_loop_config* config = fuse_loop_cfg_create();
    fuse_loop_cfg_set_clone_fd(config, 0);
    fuse_loop_cfg_set_max_threads(config, static_cast<unsigned>(std::max(1, options_.max_threads)));
    fuse_loop_cfg_set_idle_threads(config, static_cast<unsigned>(std::max(1, options_.max_threads)));
    std::thread poller;
    if (options_.poll_us > 0) {
      if (const int fd = ClonePollerDevice(); fd >= 0) {
        poller = std::thread([this, fd] { PollerMain(fd); });
      }
    }
    int rc = fuse_session_loop_mt(session_, config);
    fuse_loop_cfg_destroy(config);
    if (poller.joinable()) poller.join();
    FlushEdges();
    if (rc != 0 && !stopping_.load()) {
      return Status::IOError("FUSE session loop failed: " + std::string(std::strerror(rc < 0 ? -rc : rc)));
    }
    return Status::OK();
  }

  void Stop() {
    stopping_ = true;
    if (session_ == nullptr) return;
    fuse_session_exit(session_);
    // Wake the workers blocked reading /dev/fuse: ending the connection makes their reads fail
    // with ENODEV and the loop return. The destructor's unmount is then a no-op.
    const char* mnt = options_.mountpoint.c_str();
    if (::umount2(mnt, 0) == 0) return;
    if (errno == EBUSY) {
      // A file is still open on the mount (or a process works in it). A lazy unmount alone
      // would keep the connection, and this process, alive until the last one closes: abort
      // the connection (MNT_FORCE does that for FUSE), so those files fail with ENOTCONN from
      // now on, as when any FUSE daemon ends.
      Log(LogLevel::kWarning, "fuse: files are still open on %s; aborting the connection "
                              "(their next calls fail with ENOTCONN)", mnt);
      (void)::umount2(mnt, MNT_FORCE);
    }
    if (::umount2(mnt, MNT_DETACH) != 0) {
      std::string cmd = "fusermount3 -u -z '" + options_.mountpoint + "' 2>/dev/null";
      (void)std::system(cmd.c_str());
    }
  }

  CaptureFsStats stats() const {
    CaptureFsStats s;
    s.read_errors = read_errors_.load();
    s.edges_sent = edges_sent_.load();
    s.edge_errors = edge_errors_.load();
    s.query_dirs = query_dirs_.load();
    s.processes = processes_.processes();
    s.passthrough_opens = passthrough_opens_.load();
    s.polled_requests = polled_requests_.load();
    return s;
  }

  // ---- ACG edges ----

  void FlushEdges() {
    std::vector<CapturedEdge> edges;
    processes_.Sweep(MonoNanos(), /*all=*/true, &edges);
    SendEdges(edges);
  }

  void SendEdges(const std::vector<CapturedEdge>& edges) {
    constexpr size_t kChunk = 4096;
    for (size_t i = 0; i < edges.size(); i += kChunk) {
      std::vector<FileUpdate> ups;
      for (size_t j = i; j < std::min(edges.size(), i + kChunk); ++j) {
        FileUpdate u;
        u.op = UpdateOp::kAddEdge;
        u.record.id = edges[j].src;
        u.edge_dst = edges[j].dst;
        u.edge_weight = edges[j].weight;
        ups.push_back(std::move(u));
      }
      Status s = options_.client->Update(ups);
      if (s.ok()) {
        edges_sent_ += ups.size();
      } else {
        // Weakly consistent (DESIGN §4): an edge to a file that was deleted meanwhile, or a
        // node that is down, loses the edge, never a search result.
        edge_errors_ += ups.size();
        Log(LogLevel::kDebug, "mount: %zu ACG edges dropped: %s", ups.size(),
            s.ToString().c_str());
      }
    }
  }

  void FlusherMain() {
    std::unique_lock<std::mutex> lock(flusher_mu_);
    while (!flusher_stop_) {
      flusher_cv_.wait_for(lock, std::chrono::milliseconds(500));
      if (flusher_stop_) break;
      lock.unlock();
      std::vector<CapturedEdge> edges;
      processes_.Sweep(MonoNanos(), /*all=*/false, &edges);
      if (!edges.empty()) SendEdges(edges);
      lock.lock();
    }
  }

  void StopFlusher() {
    {
      std::lock_guard<std::mutex> lock(flusher_mu_);
      flusher_stop_ = true;
    }
    flusher_cv_.notify_all();
    if (flusher_.joinable()) flusher_.join();
  }

  // ---- inodes ----

  Inode* Get(fuse_ino_t ino) {
    if (ino == FUSE_ROOT_ID) return &root_;
    return reinterpret_cast<Inode*>(ino);
  }
  static fuse_ino_t Id(Inode* inode, Inode* root) {
    return inode == root ? FUSE_ROOT_ID : reinterpret_cast<fuse_ino_t>(inode);
  }
  fuse_ino_t Id(Inode* inode) { return Id(inode, &root_); }

  // Finds or creates the inode of file `st`, seen as `name` in `parent`, and counts one
  // lookup. (No descriptor is kept per inode: the kernel may hold more inodes than the
  // process may open files — 20,000 on this machine kind — so paths are the handles.)
  Inode* Intern(Inode* parent, const char* name, const struct stat& st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (st.st_dev == root_.dev && st.st_ino == root_.ino) {
      ++root_.nlookup;
      return &root_;
    }
    auto key = std::make_pair(st.st_dev, st.st_ino);
    auto it = files_.find(key);
    Inode* inode;
    if (it != files_.end()) {
      inode = it->second.get();
    } else {
      auto fresh = std::make_unique<Inode>();
      inode = fresh.get();
      inode->dev = st.st_dev;
      inode->ino = st.st_ino;
      files_.emplace(key, std::move(fresh));
    }
    ++inode->nlookup;
    AddLinkLocked(inode, parent, name);
    return inode;
  }

  // Records that `inode` is `name` in `dir` (first, so paths prefer the latest name).
  // REQUIRES: mu_.
  void AddLinkLocked(Inode* inode, Inode* dir, std::string_view name) {
    for (size_t i = 0; i < inode->links.size(); ++i) {
      if (inode->links[i].dir == dir && inode->links[i].name == name) {
        std::rotate(inode->links.begin(), inode->links.begin() + static_cast<ptrdiff_t>(i),
                    inode->links.begin() + static_cast<ptrdiff_t>(i) + 1);
        return;
      }
    }
    ++dir->children;
    inode->links.insert(inode->links.begin(), Link{dir, std::string(name)});
  }

  // Forgets that `inode` is `name` in `dir`. REQUIRES: mu_.
  void RemoveLinkLocked(Inode* inode, Inode* dir, std::string_view name) {
    for (size_t i = 0; i < inode->links.size(); ++i) {
      if (inode->links[i].dir == dir && inode->links[i].name == name) {
        inode->links.erase(inode->links.begin() + static_cast<ptrdiff_t>(i));
        --dir->children;
        FreeIfUnusedLocked(dir);
        return;
      }
    }
  }

  // The file inode `st` if it is known as `name` in `dir`. REQUIRES: mu_.
  Inode* FindLocked(const struct stat& st, Inode* dir, std::string_view name) {
    auto it = files_.find(std::make_pair(st.st_dev, st.st_ino));
    if (it == files_.end()) return nullptr;
    for (const Link& l : it->second->links) {
      if (l.dir == dir && l.name == name) return it->second.get();
    }
    return nullptr;
  }

  // Frees `inode` when neither the kernel nor a link refers to it, then its unused
  // directories. REQUIRES: mu_.
  void FreeIfUnusedLocked(Inode* inode) {
    if (inode == nullptr || inode == &root_ || inode->nlookup > 0 || inode->children > 0) return;
    std::vector<Link> links = std::move(inode->links);
    if (inode->kind == Kind::kFile) {
      auto it = files_.find(std::make_pair(inode->dev, inode->ino));
      if (it != files_.end() && it->second.get() == inode) files_.erase(it);
    } else {
      virtual_.erase(inode->vkey);
    }
    for (const Link& l : links) {
      --l.dir->children;
      FreeIfUnusedLocked(l.dir);
    }
  }

  void Forget(Inode* inode, uint64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (inode == &root_) return;
    inode->nlookup -= std::min(inode->nlookup, n);
    FreeIfUnusedLocked(inode);
  }

  // The in-volume path of a file inode ("/" for the root); false when its name is gone.
  // `parent_ino` (may be null) receives the inode number of the directory holding that name
  // (0 for the root).
  bool PathOf(Inode* inode, std::string* path, uint64_t* parent_ino = nullptr) {
    std::vector<const std::string*> parts;
    std::lock_guard<std::mutex> lock(mu_);
    if (parent_ino != nullptr) {
      *parent_ino = inode == &root_ || inode->links.empty() ? 0 : inode->links.front().dir->ino;
    }
    for (Inode* i = inode; i != &root_; i = i->links.front().dir) {
      if (i->links.empty() || i->kind != Kind::kFile) return false;
      parts.push_back(&i->links.front().name);
      if (parts.size() > 4096) return false;  // a cycle would be a bug; never loop forever
    }
    path->clear();
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      *path += '/';
      *path += **it;
    }
    if (path->empty()) *path = "/";
    return true;
  }

  // The backing file's absolute path; false when the inode's name is gone (ENOENT).
  bool AbsPathOf(Inode* inode, std::string* abs) {
    std::string path;
    if (!PathOf(inode, &path)) return false;
    *abs = path == "/" ? options_.backing : backing_prefix_ + path;
    return true;
  }

  // ---- index updates ----

  // The record of the file at in-volume `path` as it is now. Files with several links keep
  // their other paths (from the index) that still name this file. NotFound if it vanished.
  Status RecordAt(const std::string& path, uint64_t parent_ino, FileRecord* rec) {
    PROPELLER_RETURN_IF_ERROR(
        ReadFileRecord(backing_prefix_ + path, path, options_.volume, parent_ino, rec));
    AddOtherLinks(path, rec);
    return Status::OK();
  }

  // The record of the file open as `fd` with attributes `st`, known as in-volume `path`: what
  // RecordAt reads, without a path lookup or a second stat. The user.* attributes are read
  // (by path, as RecordAt does) only when the file has some.
  Status RecordOfOpen(int fd, const struct stat& st, const std::string& path,
                      uint64_t parent_ino, FileRecord* rec) {
    if (MayHaveUserXattrs(fd)) return RecordAt(path, parent_ino, rec);
    *rec = FileRecord{};
    rec->id = FileId{options_.volume, static_cast<uint64_t>(st.st_ino)};
    rec->paths = {path};
    rec->parent_ino = parent_ino;
    FillRecordFromStat(st, rec);
    AddOtherLinks(path, rec);
    return Status::OK();
  }

  // A file with several links keeps its other paths (from the index) that still name it.
  void AddOtherLinks(const std::string& path, FileRecord* rec) {
    if (rec->nlink > 1 && rec->type != FileType::kDirectory) {
      Result<FileRecord> old = options_.index->Get(rec->id);
      if (old.ok()) {
        for (const std::string& p : old->paths) {
          if (p == path) continue;
          struct stat st;
          if (::lstat((backing_prefix_ + p).c_str(), &st) == 0 && st.st_ino == rec->id.ino) {
            rec->paths.push_back(p);
          }
        }
        std::sort(rec->paths.begin(), rec->paths.end());
      }
    }
  }

  // Sends `ups`, or queues them when the index cannot take them (IndexWriter::Send).
  int Send(std::vector<FileUpdate>& ups, const std::string& what,
           const std::vector<std::string>& touched = {}) {
    return options_.index->Send(ups, what, touched);
  }

  // Indexes the file at `path` (kPut of its current record); with `creator` set, the placement
  // hints of the creating process; `created`: this call just created it (FileUpdate::created).
  // 0 or an errno.
  // With `changed_dir`, that directory (which gained the entry) is re-indexed in the same
  // request.
  int IndexPath(const std::string& path, uint64_t parent_ino, const ProcessInfo* creator,
                const std::vector<FileId>* producers, bool created = false,
                Inode* changed_dir = nullptr) {
    FileUpdate u;
    u.created = created;
    Status s = RecordAt(path, parent_ino, &u.record);
    return SendRecord(s, std::move(u), path, creator, producers, changed_dir);
  }

  // IndexPath for the file open as `fd` with attributes `st` (create, close after writing).
  int IndexOpen(int fd, const struct stat& st, const std::string& path, uint64_t parent_ino,
                const ProcessInfo* creator, const std::vector<FileId>* producers,
                bool created = false, Inode* changed_dir = nullptr) {
    FileUpdate u;
    u.created = created;
    Status s = RecordOfOpen(fd, st, path, parent_ino, &u.record);
    return SendRecord(s, std::move(u), path, creator, producers, changed_dir);
  }

  // Sends the kPut `u` whose record was read with result `read` (NotFound: the file is gone
  // again, nothing to index). 0 or EIO (logged).
  int SendRecord(const Status& read, FileUpdate u, const std::string& path,
                 const ProcessInfo* creator, const std::vector<FileId>* producers,
                 Inode* changed_dir = nullptr) {
    if (read.code() == StatusCode::kNotFound) return 0;
    if (!read.ok()) {
      ++read_errors_;
      Log(LogLevel::kError, "mount: reading %s for the index: %s", path.c_str(),
          read.ToString().c_str());
      return ErrnoOf(read);
    }
    if (creator != nullptr) u.app = creator->app;
    if (producers != nullptr) u.producers = *producers;
    std::vector<FileUpdate> ups;
    ups.push_back(std::move(u));
    if (changed_dir != nullptr) AddDirUpdate(changed_dir, &ups);
    return Send(ups, path);
  }

  // Appends the re-indexing of directory `dir` to `ups`: an entry was created or removed in
  // it, which changed its mtime, ctime and (for subdirectories) nlink. Nothing when the
  // directory has no name or is gone; it travels in the same request as the entry's update.
  // Like RecordOfOpen, the user.* attributes are read only when one llistxattr shows some.
  void AddDirUpdate(Inode* dir, std::vector<FileUpdate>* ups) {
    std::string path;
    uint64_t parent_ino = 0;
    if (!PathOf(dir, &path, &parent_ino)) return;
    FileUpdate u;
    const std::string abs = backing_prefix_ + path;
    struct stat st;
    if (::lstat(abs.c_str(), &st) != 0) return;
    if (MayHaveUserXattrsAt(abs)) {
      if (!RecordAt(path, parent_ino, &u.record).ok()) return;
    } else {
      u.record.id = FileId{options_.volume, static_cast<uint64_t>(st.st_ino)};
      u.record.paths = {path};
      u.record.parent_ino = parent_ino;
      FillRecordFromStat(st, &u.record);
    }
    ups->push_back(std::move(u));
  }

  // Indexes `inode` under its current name (nothing when it has none). 0 or an errno.
  int IndexInode(Inode* inode) {
    std::string path;
    uint64_t parent_ino = 0;
    if (!PathOf(inode, &path, &parent_ino)) return 0;
    return IndexPath(path, parent_ino, nullptr, nullptr);
  }

  // The update for a name that is about to stop referring to file `st` (unlink, rename over
  // it): a delete when it is the last link, else the record with that path removed. Called
  // before the name goes, so a delete can carry its route (Client::ResolveRoutes) and its
  // condition (DeleteApplies: the path and the ctime seen now): a create elsewhere that
  // reuses the inode number right after the unlink then keeps its own mapping and record.
  void RemovedName(const std::string& path, const struct stat& st, std::vector<FileUpdate>* ups) {
    FileUpdate u;
    const FileId id{options_.volume, st.st_ino};
    if (S_ISDIR(st.st_mode) || st.st_nlink <= 1) {
      u.op = UpdateOp::kDelete;
      u.record.id = id;
      u.record.paths = {path};
      u.record.ctime = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
      ups->push_back(std::move(u));
      return;
    }
    Result<FileRecord> old = options_.index->Get(id);
    if (!old.ok() && old.status().code() == StatusCode::kNotFound) return;  // nothing to remove
    if (!old.ok()) {
      // The index cannot say which names it knows: the name's removal is queued, and its
      // delivery re-reads the file's names (IndexWriter::Refresh).
      u.record.id = id;
      ups->push_back(std::move(u));
      return;
    }
    u.record = std::move(*old);
    std::erase(u.record.paths, path);
    u.record.nlink = st.st_nlink - 1;
    if (u.record.paths.empty()) {
      u.op = UpdateOp::kDelete;
      u.record = FileRecord{};
      u.record.id = id;
      u.record.paths = {path};
      u.record.ctime = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
    }
    ups->push_back(std::move(u));
  }

  // Takes the routes of the deletes in `ups` now, before the names go (RemovedName). A
  // failure is left for Send to report (the routes are then looked up there).
  void ResolveRoutes(std::vector<FileUpdate>* ups) { options_.index->ResolveRoutes(ups); }

  // Re-indexes every file under the directory now at in-volume `dir` (after a rename moved
  // it from `old`): every descendant's path changed.
  int IndexSubtree(const std::string& dir, const std::string& old, uint64_t parent_ino) {
    const std::vector<std::string> touched = {old};
    std::vector<FileUpdate> ups;
    int err = 0;
    TreeWalkOptions wo;
    wo.volume = options_.volume;
    Status s = WalkTree(backing_prefix_ + dir, wo, [&](FileRecord&& rec) -> Status {
      for (std::string& p : rec.paths) p = p == "/" ? dir : dir + p;
      if (rec.paths.size() == 1 && rec.paths[0] == dir) rec.parent_ino = parent_ino;
      if (rec.nlink > 1 && rec.type != FileType::kDirectory) {
        // Other links outside the subtree keep their paths.
        Result<FileRecord> old = options_.index->Get(rec.id);
        if (old.ok()) {
          for (const std::string& p : old->paths) {
            if (std::find(rec.paths.begin(), rec.paths.end(), p) != rec.paths.end()) continue;
            if (PathInScope(p, dir)) continue;
            struct stat st;
            if (::lstat((backing_prefix_ + p).c_str(), &st) == 0 && st.st_ino == rec.id.ino) {
              rec.paths.push_back(p);
            }
          }
          std::sort(rec.paths.begin(), rec.paths.end());
        }
      }
      FileUpdate u;
      u.record = std::move(rec);
      ups.push_back(std::move(u));
      if (ups.size() >= 1000) {
        err = Send(ups, dir + " (subtree)", touched);
        ups.clear();
        if (err != 0) return Status::IOError("index update failed");
      }
      return Status::OK();
    }, nullptr);
    if (err != 0) return err;
    if (!s.ok()) {
      ++read_errors_;
      Log(LogLevel::kError, "mount: re-indexing %s: %s", dir.c_str(), s.ToString().c_str());
      return ErrnoOf(s);
    }
    return Send(ups, dir + " (subtree)", touched);
  }

  // ---- credentials of the caller for creating files ----

  // Runs the enclosing block with the file-system identity of `req`'s caller (uid, gid,
  // groups), so what a create makes is theirs and the kernel checks their rights.
  class AsCaller {
   public:
    AsCaller(Impl* fs, fuse_req_t req) {
      const fuse_ctx* ctx = fuse_req_ctx(req);
      if (fs->am_root_ && !(ctx->uid == 0 && ctx->gid == 0)) as_.emplace(fs->CallerOf(req));
    }

   private:
    std::optional<ScopedFsCredentials> as_;
  };

  // ---- replies ----

  // `entry`: what the caller's listing says of a kQueryEntry inode (ignored for kQueryDir).
  void FillVirtualAttr(Inode* inode, const QueryEntry* entry, struct stat* st) {
    std::memset(st, 0, sizeof(*st));
    st->st_ino = inode->vino;
    if (inode->kind == Kind::kQueryDir) {
      st->st_mode = S_IFDIR | 0555;
      st->st_nlink = 2;
      const int64_t now = WallNanos();
      st->st_mtim.tv_sec = now / 1'000'000'000;
      st->st_mtim.tv_nsec = now % 1'000'000'000;
      st->st_atim = st->st_ctim = st->st_mtim;
      st->st_size = 0;
    } else {
      const FileRecord& r = entry->record;
      st->st_mode = S_IFLNK | 0777;
      st->st_nlink = 1;
      st->st_uid = r.uid;
      st->st_gid = r.gid;
      st->st_size = static_cast<off_t>(entry->target.size());
      st->st_mtim.tv_sec = r.mtime / 1'000'000'000;
      st->st_mtim.tv_nsec = r.mtime % 1'000'000'000;
      st->st_atim = st->st_ctim = st->st_mtim;
    }
    st->st_blksize = 4096;
  }

  int StatFile(Inode* inode, struct stat* st) {
    std::string abs;
    if (!AbsPathOf(inode, &abs)) return ENOENT;
    if (::lstat(abs.c_str(), st) != 0) return errno;
    return 0;
  }

  // Looks `name` up in directory `parent` and fills `e` (one lookup counted). 0 or an errno.
  int DoLookup(Inode* parent, const char* name, fuse_entry_param* e) {
    std::memset(e, 0, sizeof(*e));
    std::string dir;
    if (!AbsPathOf(parent, &dir)) return ENOENT;
    if (::lstat(ChildPath(dir, name).c_str(), &e->attr) != 0) return errno;
    InternEntry(parent, name, e);
    return 0;
  }

  // Interns the file of e->attr as `name` in `parent` (one lookup counted) and fills the rest
  // of `e`.
  void InternEntry(Inode* parent, const char* name, fuse_entry_param* e) {
    Inode* inode = Intern(parent, name, e->attr);
    e->ino = Id(inode);
    e->attr_timeout = options_.attr_timeout_s;
    e->entry_timeout = options_.entry_timeout_s;
  }

  // ---- query directories ----

  Inode* InternVirtual(Inode* parent, const std::string& name, Kind kind, bool* created) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string key = std::to_string(reinterpret_cast<uintptr_t>(parent)) + '\0' + name;
    auto it = virtual_.find(key);
    *created = it == virtual_.end();
    if (!*created) {
      ++it->second->nlookup;
      return it->second.get();
    }
    auto inode = std::make_unique<Inode>();
    inode->kind = kind;
    inode->vkey = key;
    inode->vino = (uint64_t{1} << 62) | next_vino_++;
    inode->nlookup = 1;
    inode->links.push_back(Link{parent, name});
    ++parent->children;  // the parent lives while this inode does
    Inode* raw = inode.get();
    virtual_.emplace(std::move(key), std::move(inode));
    return raw;
  }

  // Who sent `req`, as the kernel says: uid, gid and supplementary groups (RecentCallers).
  Credentials CallerOf(fuse_req_t req) {
    const fuse_ctx* ctx = fuse_req_ctx(req);
    Credentials creds{ctx->uid, ctx->gid, {}};
    creds.groups = recent_callers_.Groups(ctx->pid, ctx->uid, ctx->gid, MonoNanos(), [req] {
      gid_t groups[256];
      const int n = fuse_req_getgroups(req, 256, groups);
      return std::vector<uint32_t>(groups, groups + std::clamp(n, 0, 256));
    });
    return creds;
  }

  // Runs the query of directory `qdir` as `caller`; the listing replaces that caller's last
  // one. 0, EINVAL (bad query, logged with its position) or EIO.
  int ListQuery(const Credentials& caller, Inode* qdir, std::vector<QueryEntry>* out) {
    std::string scope;
    if (!PathOf(qdir->parent(), &scope)) return ENOENT;
    // Never a stale answer: updates still queued under the scope are waited for, a while.
    if (const uint64_t n = options_.index->WaitForScope(scope, options_.search_wait_ms); n > 0) {
      Log(LogLevel::kWarning, "mount: query directory '?%s' under %s: index catching up (%llu "
                              "updates pending)", qdir->query.c_str(), scope.c_str(),
          static_cast<unsigned long long>(n));
      return EAGAIN;
    }
    ClientSearchOptions so;
    so.volume = options_.volume;
    so.scope = scope;
    so.creds = caller;
    std::vector<QueryEntry> entries;
    Status s = options_.client->Search(qdir->query, so, [&](const ClientHit& hit) {
      // The hit's in-volume path under the scope.
      std::string path;
      for (const std::string& p : hit.record.paths) {
        if (PathInScope(p, scope) && p != scope) {
          path = p;
          break;
        }
      }
      if (path.empty()) return true;
      std::string rel = scope == "/" ? path.substr(1) : path.substr(scope.size() + 1);
      QueryEntry e;
      e.name = EncodeEntryName(rel);
      e.target = "../" + rel;
      e.record = hit.record;
      entries.push_back(std::move(e));
      return true;
    });
    if (!s.ok()) {
      Log(LogLevel::kError, "mount: query directory '?%s' under %s: %s", qdir->query.c_str(),
          scope.c_str(), s.ToString().c_str());
      return ErrnoOf(s);
    }
    std::sort(entries.begin(), entries.end(),
              [](const QueryEntry& a, const QueryEntry& b) { return a.name < b.name; });
    entries.erase(std::unique(entries.begin(), entries.end(),
                              [](const QueryEntry& a, const QueryEntry& b) {
                                return a.name == b.name;
                              }),
                  entries.end());
    ++query_dirs_;
    qdir->listings.Store(caller, entries);
    *out = std::move(entries);
    return 0;
  }

  // Entry `name` of query directory `qdir` as the caller of `req` sees it: from the caller's
  // own last listing, or a fresh one when they have none. 0, ENOENT or ListQuery's errors.
  int FindQueryEntry(fuse_req_t req, Inode* qdir, const std::string& name, QueryEntry* out) {
    const Credentials caller = CallerOf(req);
    switch (qdir->listings.Lookup(caller, name, out)) {
      case QueryListings::Found::kYes: return 0;
      case QueryListings::Found::kNo: return ENOENT;
      case QueryListings::Found::kNoListing: break;
    }
    std::vector<QueryEntry> entries;
    if (int err = ListQuery(caller, qdir, &entries); err != 0) return err;
    return qdir->listings.Lookup(caller, name, out) == QueryListings::Found::kYes ? 0 : ENOENT;
  }

  // What the caller of `req` may know of the query entry `inode`: 0 with *out filled, or
  // ENOENT when their own listing lacks it.
  int EntryForCaller(fuse_req_t req, Inode* inode, QueryEntry* out) {
    Inode* qdir = nullptr;
    std::string name;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (inode->links.empty()) return ENOENT;
      qdir = inode->links.front().dir;
      name = inode->links.front().name;
    }
    return FindQueryEntry(req, qdir, name, out);
  }

  void LookupQueryDir(fuse_req_t req, Inode* parent, const char* name) {
    // Parse now: a malformed query fails the lookup with EINVAL and a log line naming the
    // position (the search would say the same, later and less visibly).
    Result<Query> q = Query::Parse(name + 1);
    if (!q.ok()) {
      Log(LogLevel::kError, "mount: query directory '%s': %s", name,
          q.status().ToString().c_str());
      fuse_reply_err(req, EINVAL);
      return;
    }
    bool created = false;
    Inode* qdir = InternVirtual(parent, name, Kind::kQueryDir, &created);
    if (created) qdir->query = name + 1;
    fuse_entry_param e;
    std::memset(&e, 0, sizeof(e));
    e.ino = Id(qdir);
    FillVirtualAttr(qdir, nullptr, &e.attr);
    e.attr_timeout = 0;  // fresh at every access
    e.entry_timeout = 0;
    fuse_reply_entry(req, &e);
  }

  void LookupQueryEntry(fuse_req_t req, Inode* qdir, const char* name) {
    QueryEntry found;
    if (int err = FindQueryEntry(req, qdir, name, &found); err != 0) {
      fuse_reply_err(req, err);
      return;
    }
    bool created = false;
    Inode* inode = InternVirtual(qdir, name, Kind::kQueryEntry, &created);
    fuse_entry_param e;
    std::memset(&e, 0, sizeof(e));
    e.ino = Id(inode);
    FillVirtualAttr(inode, &found, &e.attr);
    e.attr_timeout = 0;  // every stat comes back here, with its caller's credentials
    e.entry_timeout = 0;
    fuse_reply_entry(req, &e);
  }

  // ---- operations ----

  static Impl* Self(fuse_req_t req) { return static_cast<Impl*>(fuse_req_userdata(req)); }

  void OnInit(struct fuse_conn_info* conn) {
    if (options_.writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
      conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    } else {
      conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    }
    // Plain readdir: readdirplus would take a lookup per entry (PITFALLS).
    conn->want &= ~FUSE_CAP_READDIRPLUS;
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
    // Never FUSE_CAP_NO_OPEN_SUPPORT / no-flush: they silently stop open/close tracking.
  }

  void OnLookup(fuse_req_t req, fuse_ino_t parent_ino, const char* name) {
    Inode* parent = Get(parent_ino);
    if (parent->kind == Kind::kQueryDir) return LookupQueryEntry(req, parent, name);
    if (parent->kind == Kind::kQueryEntry) return (void)fuse_reply_err(req, ENOTDIR);
    if (IsQueryName(name)) return LookupQueryDir(req, parent, name);
    fuse_entry_param e;
    int err = DoLookup(parent, name, &e);
    if (err == ENOENT) {
      // Negative entry, cached by the kernel for the entry timeout (creates invalidate it).
      std::memset(&e, 0, sizeof(e));
      e.entry_timeout = options_.entry_timeout_s;
      fuse_reply_entry(req, &e);
      return;
    }
    if (err != 0) return (void)fuse_reply_err(req, err);
    fuse_reply_entry(req, &e);
  }

  void OnGetattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Inode* inode = Get(ino);
    struct stat st;
    if (inode->kind != Kind::kFile) {
      QueryEntry entry;
      if (inode->kind == Kind::kQueryEntry) {
        if (int err = EntryForCaller(req, inode, &entry); err != 0) {
          return (void)fuse_reply_err(req, err);
        }
      }
      FillVirtualAttr(inode, &entry, &st);
      fuse_reply_attr(req, &st, 0);
      return;
    }
    int err = 0;
    if (fi != nullptr && HandleOf(fi)->fd >= 0) {
      if (::fstat(HandleOf(fi)->fd, &st) != 0) err = errno;
    } else {
      err = StatFile(inode, &st);
    }
    if (err != 0) return (void)fuse_reply_err(req, err);
    fuse_reply_attr(req, &st, options_.attr_timeout_s);
  }

  void OnSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int valid,
                 struct fuse_file_info* fi) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* inode = Get(ino);
    if (inode->kind != Kind::kFile) return (void)fuse_reply_err(req, EROFS);
    std::string abs;
    if (!AbsPathOf(inode, &abs) && fi == nullptr) return (void)fuse_reply_err(req, ENOENT);
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    int rc = 0;
    if (valid & FUSE_SET_ATTR_MODE) {
      rc = fi != nullptr ? ::fchmod(HandleOf(fi)->fd, attr->st_mode)
                         : ::chmod(abs.c_str(), attr->st_mode);
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
      uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : static_cast<uid_t>(-1);
      gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : static_cast<gid_t>(-1);
      rc = fi != nullptr ? ::fchown(HandleOf(fi)->fd, uid, gid) : ::lchown(abs.c_str(), uid, gid);
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    if (valid & FUSE_SET_ATTR_SIZE) {
      if (fi != nullptr) {
        rc = ::ftruncate(HandleOf(fi)->fd, attr->st_size);
      } else {
        rc = ::truncate(abs.c_str(), attr->st_size);
      }
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    // FATTR_KILL_SUIDGID (KillprivV2): a chown, or a truncate by a caller without CAP_FSETID.
    if ((valid & FUSE_SET_ATTR_KILL_SUID) && !(valid & FUSE_SET_ATTR_MODE)) {
      const int err = KillPrivileges(req, fi != nullptr ? HandleOf(fi)->fd : -1, abs);
      if (err != 0) return (void)fuse_reply_err(req, err);
    }
    if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
      struct timespec tv[2];
      tv[0].tv_sec = 0;
      tv[1].tv_sec = 0;
      tv[0].tv_nsec = UTIME_OMIT;
      tv[1].tv_nsec = UTIME_OMIT;
      if (valid & FUSE_SET_ATTR_ATIME_NOW) {
        tv[0].tv_nsec = UTIME_NOW;
      } else if (valid & FUSE_SET_ATTR_ATIME) {
        tv[0] = attr->st_atim;
      }
      if (valid & FUSE_SET_ATTR_MTIME_NOW) {
        tv[1].tv_nsec = UTIME_NOW;
      } else if (valid & FUSE_SET_ATTR_MTIME) {
        tv[1] = attr->st_mtim;
      }
      if (fi != nullptr) {
        rc = ::futimens(HandleOf(fi)->fd, tv);
      } else {
        rc = ::utimensat(AT_FDCWD, abs.c_str(), tv, AT_SYMLINK_NOFOLLOW);
      }
      if (rc != 0) return (void)fuse_reply_err(req, errno);
    }
    struct stat st;
    int err = fi != nullptr ? (::fstat(HandleOf(fi)->fd, &st) == 0 ? 0 : errno)
                            : StatFile(inode, &st);
    if (err != 0) return (void)fuse_reply_err(req, err);
    // Times set through a handle open for writing — the kernel's writeback cache flushing
    // mtime before the close — are indexed by that handle's close (flush), which follows.
    constexpr int kTimes = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                           FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
    const bool flushed_by_close = fi != nullptr && HandleOf(fi)->write && (valid & ~kTimes) == 0;
    if (!flushed_by_close) {
      err = IndexInode(inode);
      if (err != 0) return (void)fuse_reply_err(req, err);
    }
    fuse_reply_attr(req, &st, options_.attr_timeout_s);
  }

  void OnReadlink(fuse_req_t req, fuse_ino_t ino) {
    Inode* inode = Get(ino);
    if (inode->kind == Kind::kQueryEntry) {
      QueryEntry entry;
      if (int err = EntryForCaller(req, inode, &entry); err != 0) {
        return (void)fuse_reply_err(req, err);
      }
      fuse_reply_readlink(req, entry.target.c_str());
      return;
    }
    if (inode->kind != Kind::kFile) return (void)fuse_reply_err(req, EINVAL);
    std::string abs;
    if (!AbsPathOf(inode, &abs)) return (void)fuse_reply_err(req, ENOENT);
    char buf[PATH_MAX + 1];
    ssize_t n = ::readlink(abs.c_str(), buf, PATH_MAX);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    buf[n] = '\0';
    fuse_reply_readlink(req, buf);
  }

  // Creates through `make` (mkdir, mknod, symlink) as the caller, then looks the new entry up
  // and indexes it.
  template <typename MakeFn>
  void MakeEntry(fuse_req_t req, fuse_ino_t parent_ino, const char* name, MakeFn make) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = Get(parent_ino);
    if (parent->kind != Kind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (IsQueryName(name)) return (void)fuse_reply_err(req, EINVAL);
    std::string dir_abs;
    if (!AbsPathOf(parent, &dir_abs)) return (void)fuse_reply_err(req, ENOENT);
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    {
      AsCaller as(this, req);
      if (make(ChildPath(dir_abs, name)) != 0) return (void)fuse_reply_err(req, errno);
    }
    fuse_entry_param e;
    int err = DoLookup(parent, name, &e);
    if (err != 0) return (void)fuse_reply_err(req, err);
    std::string dir;
    if (PathOf(parent, &dir)) {
      ProcessInfo creator;
      const bool known = processes_.Identify(fuse_req_ctx(req)->pid, MonoNanos(), &creator);
      // mkdir, mknod and symlink fail on an existing name: the inode is new.
      err = IndexPath(ChildPath(dir, name), parent->ino, known ? &creator : nullptr, nullptr,
                      /*created=*/true, parent);
      if (err != 0) {
        Forget(Get(e.ino), 1);
        return (void)fuse_reply_err(req, err);
      }
    }
    fuse_reply_entry(req, &e);
  }

  void OnMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
    MakeEntry(req, parent, name,
              [&](const std::string& abs) { return ::mknod(abs.c_str(), mode, rdev); });
  }
  void OnMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
    MakeEntry(req, parent, name,
              [&](const std::string& abs) { return ::mkdir(abs.c_str(), mode); });
  }
  void OnSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
    MakeEntry(req, parent, name,
              [&](const std::string& abs) { return ::symlink(link, abs.c_str()); });
  }

  void OnLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent_ino, const char* newname) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* inode = Get(ino);
    Inode* newparent = Get(newparent_ino);
    if (inode->kind != Kind::kFile || newparent->kind != Kind::kFile) {
      return (void)fuse_reply_err(req, EROFS);
    }
    if (IsQueryName(newname)) return (void)fuse_reply_err(req, EINVAL);
    std::string from, to_dir;
    if (!AbsPathOf(inode, &from) || !AbsPathOf(newparent, &to_dir)) {
      return (void)fuse_reply_err(req, ENOENT);
    }
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    {
      AsCaller as(this, req);
      if (::link(from.c_str(), ChildPath(to_dir, newname).c_str()) != 0) {
        return (void)fuse_reply_err(req, errno);
      }
    }
    fuse_entry_param e;
    int err = DoLookup(newparent, newname, &e);
    if (err != 0) return (void)fuse_reply_err(req, err);
    std::string dir;
    if (PathOf(newparent, &dir)) {
      err = IndexPath(ChildPath(dir, newname), newparent->ino, nullptr, nullptr, false, newparent);
      if (err != 0) {
        Forget(Get(e.ino), 1);
        return (void)fuse_reply_err(req, err);
      }
    }
    fuse_reply_entry(req, &e);
  }

  void OnUnlinkOrRmdir(fuse_req_t req, fuse_ino_t parent_ino, const char* name, bool dir) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = Get(parent_ino);
    if (parent->kind != Kind::kFile) return (void)fuse_reply_err(req, EROFS);
    std::string dir_abs;
    if (!AbsPathOf(parent, &dir_abs)) return (void)fuse_reply_err(req, ENOENT);
    const std::string abs = ChildPath(dir_abs, name);
    struct stat st;
    if (::lstat(abs.c_str(), &st) != 0) return (void)fuse_reply_err(req, errno);
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    std::string dpath;
    const bool named = PathOf(parent, &dpath);
    std::vector<FileUpdate> ups;
    if (named) {
      RemovedName(ChildPath(dpath, name), st, &ups);
      ResolveRoutes(&ups);
    }
    if ((dir ? ::rmdir(abs.c_str()) : ::unlink(abs.c_str())) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (Inode* gone = FindLocked(st, parent, name)) RemoveLinkLocked(gone, parent, name);
    }
    if (!named) return (void)fuse_reply_err(req, 0);
    AddDirUpdate(parent, &ups);
    fuse_reply_err(req, Send(ups, ChildPath(dpath, name), {ChildPath(dpath, name)}));
  }

  void OnRename(fuse_req_t req, fuse_ino_t parent_ino, const char* name, fuse_ino_t newparent_ino,
                const char* newname, unsigned int flags) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = Get(parent_ino);
    Inode* newparent = Get(newparent_ino);
    if (parent->kind != Kind::kFile || newparent->kind != Kind::kFile) {
      return (void)fuse_reply_err(req, EROFS);
    }
    if (IsQueryName(newname)) return (void)fuse_reply_err(req, EINVAL);
    std::string from_abs, to_abs;
    if (!AbsPathOf(parent, &from_abs) || !AbsPathOf(newparent, &to_abs)) {
      return (void)fuse_reply_err(req, ENOENT);
    }
    from_abs = ChildPath(from_abs, name);
    to_abs = ChildPath(to_abs, newname);
    struct stat src, dst;
    if (::lstat(from_abs.c_str(), &src) != 0) return (void)fuse_reply_err(req, errno);
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    const bool had_dst = ::lstat(to_abs.c_str(), &dst) == 0;
    // The file replaced at the destination loses that name: its removal is prepared (and its
    // route taken) before the rename, as for an unlink.
    std::vector<FileUpdate> replaced;
    std::string replaced_path;
    if (had_dst && !(flags & RENAME_EXCHANGE) &&
        !(src.st_ino == dst.st_ino && src.st_dev == dst.st_dev) &&
        PathOf(newparent, &replaced_path)) {
      replaced_path = ChildPath(replaced_path, newname);
      RemovedName(replaced_path, dst, &replaced);
      ResolveRoutes(&replaced);
    }
    if (::renameat2(AT_FDCWD, from_abs.c_str(), AT_FDCWD, to_abs.c_str(), flags) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    {
      // The inode tree follows: the moved file is now newname in newparent; what it replaced
      // lost that name (or, exchanged, took the old one).
      std::lock_guard<std::mutex> lock(mu_);
      Inode* moved = FindLocked(src, parent, name);
      Inode* other = had_dst ? FindLocked(dst, newparent, newname) : nullptr;
      if (moved != nullptr && moved == other) other = nullptr;  // links of one file
      // Add before removing: removing a last link may free the directory otherwise.
      if (moved != nullptr) AddLinkLocked(moved, newparent, newname);
      if (other != nullptr && (flags & RENAME_EXCHANGE)) AddLinkLocked(other, parent, name);
      if (other != nullptr) RemoveLinkLocked(other, newparent, newname);
      if (moved != nullptr) RemoveLinkLocked(moved, parent, name);
    }
    std::string from_dir, to_dir;
    if (!PathOf(parent, &from_dir) || !PathOf(newparent, &to_dir)) {
      return (void)fuse_reply_err(req, 0);
    }
    const std::string from = ChildPath(from_dir, name), to = ChildPath(to_dir, newname);
    if (had_dst && src.st_ino == dst.st_ino && src.st_dev == dst.st_dev) {
      return (void)fuse_reply_err(req, 0);  // two links of one file: rename does nothing
    }
    int err = Send(replaced, replaced_path, {replaced_path});
    // The moved file (or tree) under its new name; with RENAME_EXCHANGE the other one too.
    auto reindex = [&](const struct stat& st, const std::string& path, const std::string& old,
                       Inode* dir) -> int {
      if (S_ISDIR(st.st_mode)) return IndexSubtree(path, old, dir->ino);
      FileUpdate u;
      Status s = RecordAt(path, dir->ino, &u.record);
      if (s.code() == StatusCode::kNotFound) return 0;
      if (!s.ok()) return ErrnoOf(s);
      std::erase(u.record.paths, old);
      std::vector<FileUpdate> ups;
      ups.push_back(std::move(u));
      return Send(ups, path, {old});
    };
    if (err == 0) err = reindex(src, to, from, newparent);
    if (err == 0 && had_dst && (flags & RENAME_EXCHANGE)) err = reindex(dst, from, to, parent);
    if (err == 0) {
      // Both directories' entries changed (mtime, ctime; nlink when a directory moved).
      std::vector<FileUpdate> ups;
      AddDirUpdate(parent, &ups);
      if (newparent != parent) AddDirUpdate(newparent, &ups);
      err = Send(ups, from_dir);
    }
    fuse_reply_err(req, err);
  }

  // ---- files ----

  static Handle* HandleOf(struct fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }

  int OpenFlags(int flags) {
    if (options_.writeback) {
      // PITFALLS: with the writeback cache the kernel may read a file opened write-only and
      // owns the file's end; open read-write and without O_APPEND.
      if ((flags & O_ACCMODE) == O_WRONLY) flags = (flags & ~O_ACCMODE) | O_RDWR;
      flags &= ~O_APPEND;
    }
    return (flags & ~O_NOFOLLOW) | O_CLOEXEC;
  }

  // Capture for an open of `inode` with `flags` by the caller of `req` (created: by create);
  // fills the handle's owner.
  void Capture(fuse_req_t req, Inode* inode, Handle* h, int flags, bool created,
               std::vector<FileId>* producers) {
    const int64_t now = MonoNanos();
    if (!processes_.Identify(fuse_req_ctx(req)->pid, now, &h->owner)) return;
    h->has_owner = true;
    if (!options_.capture_edges) return;
    const bool reads = !created && (flags & O_ACCMODE) != O_WRONLY && !(flags & O_TRUNC);
    h->open_mark = processes_.OnOpen(h->owner, FileId{options_.volume, inode->ino}, reads,
                                     h->write, now, producers);
  }

  void OnCreate(fuse_req_t req, fuse_ino_t parent_ino, const char* name, mode_t mode,
                struct fuse_file_info* fi) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Inode* parent = Get(parent_ino);
    if (parent->kind != Kind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (IsQueryName(name)) return (void)fuse_reply_err(req, EINVAL);
    std::string dir_abs;
    if (!AbsPathOf(parent, &dir_abs)) return (void)fuse_reply_err(req, ENOENT);
    int fd;
    // Whether this call made the file (the index then places it afresh: FileUpdate::created).
    // The kernel sends create for a name it believes absent, but the backing directory may
    // have gained it since; an exclusive open tells, and an existing file is opened as the
    // caller asked (O_CREAT without O_EXCL).
    bool created = true;
    if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    {
      AsCaller as(this, req);
      const std::string abs = ChildPath(dir_abs, name);
      fd = ::open(abs.c_str(), OpenFlags(fi->flags) | O_CREAT | O_EXCL, mode);
      if (fd < 0 && errno == EEXIST && !(fi->flags & O_EXCL)) {
        created = false;
        fd = ::open(abs.c_str(), OpenFlags(fi->flags) | O_CREAT, mode);
      }
    }
    if (fd < 0) return (void)fuse_reply_err(req, errno);
    if (!created && KillprivV2::KillRequested()) {  // an existing file, truncated
      const int err = KillPrivileges(req, fd, "");
      if (err != 0) {
        ::close(fd);
        return (void)fuse_reply_err(req, err);
      }
    }
    // The entry from the new descriptor: no second path lookup.
    fuse_entry_param e;
    std::memset(&e, 0, sizeof(e));
    if (::fstat(fd, &e.attr) != 0) {
      const int err = errno;
      ::close(fd);
      return (void)fuse_reply_err(req, err);
    }
    InternEntry(parent, name, &e);
    Inode* inode = Get(e.ino);
    auto h = std::make_unique<Handle>();
    h->fd = fd;
    h->inode = inode;
    h->write = true;  // create is a write-open (DESIGN §4)
    std::vector<FileId> producers;
    Capture(req, inode, h.get(), fi->flags, /*created=*/true, &producers);
    std::string dir;
    if (PathOf(parent, &dir)) {
      const int err = IndexOpen(fd, e.attr, ChildPath(dir, name), parent->ino,
                                h->has_owner ? &h->owner : nullptr, &producers, created,
                                parent);
      if (err != 0) {
        ::close(fd);
        Forget(inode, 1);
        return (void)fuse_reply_err(req, err);
      }
    }
    if (const int err = AttachBacking(req, h.get(), e.attr.st_mode); err != 0) {
      ::close(fd);
      Forget(inode, 1);
      return (void)fuse_reply_err(req, err);
    }
    Handle* handle = h.release();
    fi->fh = reinterpret_cast<uint64_t>(handle);
    if (options_.writeback) fi->keep_cache = 1;
    if (fuse_reply_create(req, &e, fi) != 0) {
      // The creating call was interrupted: the kernel holds neither the entry nor the open.
      CloseHandle(handle);
      Forget(inode, 1);
    }
  }

  void OnOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Inode* inode = Get(ino);
    if (inode->kind != Kind::kFile) return (void)fuse_reply_err(req, EISDIR);
    std::string abs;
    if (!AbsPathOf(inode, &abs)) return (void)fuse_reply_err(req, ENOENT);
    const bool write = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
    if (write) {
      if (const int err = options_.index->Admit(); err != 0) return (void)fuse_reply_err(req, err);
    }
    int fd = ::open(abs.c_str(), OpenFlags(fi->flags));
    if (fd < 0) return (void)fuse_reply_err(req, errno);
    if (KillprivV2::KillRequested()) {  // O_TRUNC by a caller without CAP_FSETID
      const int err = KillPrivileges(req, fd, "");
      if (err != 0) {
        ::close(fd);
        return (void)fuse_reply_err(req, err);
      }
    }
    auto h = std::make_unique<Handle>();
    h->fd = fd;
    h->inode = inode;
    h->write = write;
    Capture(req, inode, h.get(), fi->flags, /*created=*/false, nullptr);
    if (passthrough_.enabled()) {
      struct stat st;
      const int err = ::fstat(fd, &st) != 0 ? errno : AttachBacking(req, h.get(), st.st_mode);
      if (err != 0) {
        ::close(fd);
        return (void)fuse_reply_err(req, err);
      }
    }
    Handle* handle = h.release();
    fi->fh = reinterpret_cast<uint64_t>(handle);
    // Data stays in the page cache across opens when the kernel's cache is trusted.
    if (options_.writeback) fi->keep_cache = 1;
    if (fuse_reply_open(req, fi) != 0) CloseHandle(handle);  // the open was interrupted
  }

  void OnRead(fuse_req_t req, size_t size, off_t off, struct fuse_file_info* fi) {
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = HandleOf(fi)->fd;
    buf.buf[0].pos = off;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
  }

  void OnWriteBuf(fuse_req_t req, struct fuse_bufvec* in, off_t off, struct fuse_file_info* fi) {
    if (KillprivV2::KillRequested()) {
      // Before the data, as the VFS orders it.
      const int err = KillPrivileges(req, HandleOf(fi)->fd, "");
      if (err != 0) return (void)fuse_reply_err(req, err);
    }
    struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
    out.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    out.buf[0].fd = HandleOf(fi)->fd;
    out.buf[0].pos = off;
    ssize_t n = fuse_buf_copy(&out, in, static_cast<fuse_buf_copy_flags>(0));
    if (n < 0) return (void)fuse_reply_err(req, static_cast<int>(-n));
    fuse_reply_write(req, static_cast<size_t>(n));
  }

  void OnFlush(fuse_req_t req, struct fuse_file_info* fi) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    Handle* h = HandleOf(fi);
    // close() of a duplicate releases POSIX locks the caller holds, as a local close would.
    int rc = ::close(::dup(h->fd));
    if (rc != 0) return (void)fuse_reply_err(req, errno);
    if (!h->write) return (void)fuse_reply_err(req, 0);
    struct stat st;
    if (::fstat(h->fd, &st) != 0 || st.st_nlink == 0) return (void)fuse_reply_err(req, 0);
    if (h->has_owner && options_.capture_edges) {
      processes_.OnWriteClose(h->owner, FileId{options_.volume, h->inode->ino}, MonoNanos(),
                              h->open_mark);
    }
    // The record from the handle's descriptor and the stat just taken.
    std::string path;
    uint64_t parent_ino = 0;
    if (!PathOf(h->inode, &path, &parent_ino)) return (void)fuse_reply_err(req, 0);
    fuse_reply_err(req, IndexOpen(h->fd, st, path, parent_ino, nullptr, nullptr));
  }

  void OnRelease(fuse_req_t req, struct fuse_file_info* fi) {
    CloseHandle(HandleOf(fi));
    fuse_reply_err(req, 0);
  }

  void OnFsync(fuse_req_t req, int datasync, struct fuse_file_info* fi) {
    int fd = HandleOf(fi)->fd;
    int rc = datasync ? ::fdatasync(fd) : ::fsync(fd);
    fuse_reply_err(req, rc == 0 ? 0 : errno);
  }

  void OnFallocate(fuse_req_t req, int mode, off_t offset, off_t length,
                   struct fuse_file_info* fi) {
    int rc = ::fallocate(HandleOf(fi)->fd, mode, offset, length);
    fuse_reply_err(req, rc == 0 ? 0 : errno);
  }

  // ---- directories ----

  void OnOpendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Inode* inode = Get(ino);
    auto h = std::make_unique<Handle>();
    h->inode = inode;
    if (inode->kind == Kind::kQueryDir) {
      int err = ListQuery(CallerOf(req), inode, &h->entries);
      if (err != 0) return (void)fuse_reply_err(req, err);
    } else if (inode->kind == Kind::kFile) {
      std::string abs;
      if (!AbsPathOf(inode, &abs)) return (void)fuse_reply_err(req, ENOENT);
      int fd = ::open(abs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return (void)fuse_reply_err(req, errno);
      h->dir = ::fdopendir(fd);
      if (h->dir == nullptr) {
        int err = errno;
        ::close(fd);
        return (void)fuse_reply_err(req, err);
      }
    } else {
      return (void)fuse_reply_err(req, ENOTDIR);
    }
    fi->fh = reinterpret_cast<uint64_t>(h.release());
    if (inode->kind == Kind::kFile) fi->cache_readdir = 0;
    fuse_reply_open(req, fi);
  }

  void OnReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
                 struct fuse_file_info* fi) {
    Handle* h = HandleOf(fi);
    std::vector<char> buf(size);
    size_t used = 0;
    if (h->dir == nullptr) {
      // A query directory: ".", "..", then the snapshot taken at opendir. Offsets are
      // positions in that list (+1).
      Inode* qdir = Get(ino);
      const size_t total = h->entries.size() + 2;
      for (size_t i = static_cast<size_t>(offset); i < total; ++i) {
        struct stat st;
        std::memset(&st, 0, sizeof(st));
        std::string name;
        if (i == 0) {
          name = ".";
          st.st_mode = S_IFDIR;
          st.st_ino = qdir->vino;
        } else if (i == 1) {
          name = "..";
          st.st_mode = S_IFDIR;
        } else {
          name = h->entries[i - 2].name;
          st.st_mode = S_IFLNK;
          st.st_ino = (uint64_t{1} << 61) | i;
        }
        size_t n = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st,
                                     static_cast<off_t>(i + 1));
        if (n > size - used) break;
        used += n;
      }
      fuse_reply_buf(req, buf.data(), used);
      return;
    }
    if (offset != h->offset) {
      ::seekdir(h->dir, offset);
      h->entry = nullptr;
      h->offset = offset;
    }
    while (true) {
      if (h->entry == nullptr) {
        errno = 0;
        h->entry = ::readdir(h->dir);
        if (h->entry == nullptr) {
          if (errno != 0 && used == 0) return (void)fuse_reply_err(req, errno);
          break;
        }
      }
      struct stat st;
      std::memset(&st, 0, sizeof(st));
      st.st_ino = h->entry->d_ino;
      st.st_mode = static_cast<mode_t>(h->entry->d_type) << 12;
      const off_t next = h->entry->d_off;
      size_t n = fuse_add_direntry(req, buf.data() + used, size - used, h->entry->d_name, &st,
                                   next);
      if (n > size - used) break;
      used += n;
      h->entry = nullptr;
      h->offset = next;
    }
    fuse_reply_buf(req, buf.data(), used);
  }

  void OnReleasedir(fuse_req_t req, struct fuse_file_info* fi) {
    Handle* h = HandleOf(fi);
    if (h->dir != nullptr) ::closedir(h->dir);
    delete h;
    fuse_reply_err(req, 0);
  }

  void OnFsyncdir(fuse_req_t req, int datasync, struct fuse_file_info* fi) {
    Handle* h = HandleOf(fi);
    if (h->dir == nullptr) return (void)fuse_reply_err(req, 0);
    int fd = ::dirfd(h->dir);
    int rc = datasync ? ::fdatasync(fd) : ::fsync(fd);
    fuse_reply_err(req, rc == 0 ? 0 : errno);
  }

  void OnStatfs(fuse_req_t req, fuse_ino_t /*ino*/) {
    struct statvfs sv;
    if (::statvfs(options_.backing.c_str(), &sv) != 0) return (void)fuse_reply_err(req, errno);
    fuse_reply_statfs(req, &sv);
  }

  // ---- extended attributes (on the path, never following a symlink) ----

  std::string XattrPath(Inode* inode) {
    std::string abs;
    return AbsPathOf(inode, &abs) ? abs : std::string();
  }

  // A query entry has no extended attributes, and only a caller whose listing has it may
  // learn even that (ENOENT for the others).
  int VirtualXattrError(fuse_req_t req, Inode* inode) {
    QueryEntry entry;
    if (inode->kind == Kind::kQueryEntry && EntryForCaller(req, inode, &entry) != 0) return ENOENT;
    return 0;
  }

  void OnGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
    Inode* inode = Get(ino);
    if (inode->kind != Kind::kFile) {
      const int err = VirtualXattrError(req, inode);
      return (void)fuse_reply_err(req, err != 0 ? err : ENODATA);
    }
    std::vector<char> buf(size);
    ssize_t n = ::lgetxattr(XattrPath(inode).c_str(), name, size ? buf.data() : nullptr, size);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    if (size == 0) return (void)fuse_reply_xattr(req, static_cast<size_t>(n));
    fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
  }

  void OnListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    Inode* inode = Get(ino);
    if (inode->kind != Kind::kFile) {
      if (int err = VirtualXattrError(req, inode); err != 0) return (void)fuse_reply_err(req, err);
      return (void)(size == 0 ? fuse_reply_xattr(req, 0) : fuse_reply_buf(req, nullptr, 0));
    }
    std::vector<char> buf(size);
    ssize_t n = ::llistxattr(XattrPath(inode).c_str(), size ? buf.data() : nullptr, size);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    if (size == 0) return (void)fuse_reply_xattr(req, static_cast<size_t>(n));
    fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
  }

  // Only user.* attributes are indexed.
  int AdmitXattrChange(const char* name) {
    return std::strncmp(name, "user.", 5) == 0 ? options_.index->Admit() : 0;
  }

  void XattrChanged(fuse_req_t req, Inode* inode, const char* name) {
    Client::Deadline deadline(options_.index->timeout_ms());  // all its index calls
    if (std::strncmp(name, "user.", 5) != 0) return (void)fuse_reply_err(req, 0);
    fuse_reply_err(req, IndexInode(inode));
  }

  void OnSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                  size_t size, int flags) {
    Inode* inode = Get(ino);
    if (inode->kind != Kind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (const int err = AdmitXattrChange(name); err != 0) return (void)fuse_reply_err(req, err);
    if (::lsetxattr(XattrPath(inode).c_str(), name, value, size, flags) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    XattrChanged(req, inode, name);
  }

  void OnRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
    Inode* inode = Get(ino);
    if (inode->kind != Kind::kFile) return (void)fuse_reply_err(req, EROFS);
    if (const int err = AdmitXattrChange(name); err != 0) return (void)fuse_reply_err(req, err);
    if (::lremovexattr(XattrPath(inode).c_str(), name) != 0) {
      return (void)fuse_reply_err(req, errno);
    }
    XattrChanged(req, inode, name);
  }

  static fuse_lowlevel_ops MakeOps();

  const CaptureFsOptions options_;
  ProcessTable processes_;
  RecentCallers recent_callers_;  // thread-safe
  std::string backing_prefix_;  // options_.backing without a trailing '/' ("" for "/")
  bool am_root_ = false;
  Inode root_;

  std::mutex mu_;
  std::map<std::pair<dev_t, ino_t>, std::unique_ptr<Inode>> files_;  // Under mu_.
  std::unordered_map<std::string, std::unique_ptr<Inode>> virtual_;   // Under mu_.
  uint64_t next_vino_ = 1;                                            // Under mu_.

  struct fuse_session* session_ = nullptr;
  bool mounted_ = false;
  KillprivV2 killpriv_;
  KernelPassthrough passthrough_;
  int dev_fd_ = -1;  // /dev/fuse of the session
  std::mutex backing_mu_;
  bool passthrough_failed_ = false;  // Under backing_mu_.
  std::atomic<bool> stopping_{false};

  std::thread flusher_;
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool flusher_stop_ = false;  // Under flusher_mu_.

  std::atomic<uint64_t> read_errors_{0}, edges_sent_{0}, edge_errors_{0},
      query_dirs_{0}, passthrough_opens_{0}, polled_requests_{0};
};

fuse_lowlevel_ops CaptureFs::Impl::MakeOps() {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = [](void* userdata, struct fuse_conn_info* conn) {
    static_cast<Impl*>(userdata)->OnInit(conn);
  };
  ops.lookup = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    Self(req)->OnLookup(req, parent, name);
  };
  ops.forget = [](fuse_req_t req, fuse_ino_t ino, uint64_t n) {
    Self(req)->Forget(Self(req)->Get(ino), n);
    fuse_reply_none(req);
  };
  ops.forget_multi = [](fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
    for (size_t i = 0; i < count; ++i) {
      Self(req)->Forget(Self(req)->Get(forgets[i].ino), forgets[i].nlookup);
    }
    fuse_reply_none(req);
  };
  ops.getattr = [](fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Self(req)->OnGetattr(req, ino, fi);
  };
  ops.setattr = [](fuse_req_t req, fuse_ino_t ino, struct stat* attr, int valid,
                   struct fuse_file_info* fi) { Self(req)->OnSetattr(req, ino, attr, valid, fi); };
  ops.readlink = [](fuse_req_t req, fuse_ino_t ino) { Self(req)->OnReadlink(req, ino); };
  ops.mknod = [](fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
    Self(req)->OnMknod(req, parent, name, mode, rdev);
  };
  ops.mkdir = [](fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
    Self(req)->OnMkdir(req, parent, name, mode);
  };
  ops.symlink = [](fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
    Self(req)->OnSymlink(req, link, parent, name);
  };
  ops.link = [](fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
    Self(req)->OnLink(req, ino, newparent, newname);
  };
  ops.unlink = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    Self(req)->OnUnlinkOrRmdir(req, parent, name, /*dir=*/false);
  };
  ops.rmdir = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    Self(req)->OnUnlinkOrRmdir(req, parent, name, /*dir=*/true);
  };
  ops.rename = [](fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                  const char* newname, unsigned int flags) {
    Self(req)->OnRename(req, parent, name, newparent, newname, flags);
  };
  ops.create = [](fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                  struct fuse_file_info* fi) { Self(req)->OnCreate(req, parent, name, mode, fi); };
  ops.open = [](fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Self(req)->OnOpen(req, ino, fi);
  };
  ops.read = [](fuse_req_t req, fuse_ino_t, size_t size, off_t off, struct fuse_file_info* fi) {
    Self(req)->OnRead(req, size, off, fi);
  };
  ops.write_buf = [](fuse_req_t req, fuse_ino_t, struct fuse_bufvec* in, off_t off,
                     struct fuse_file_info* fi) { Self(req)->OnWriteBuf(req, in, off, fi); };
  ops.flush = [](fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
    Self(req)->OnFlush(req, fi);
  };
  ops.release = [](fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
    Self(req)->OnRelease(req, fi);
  };
  ops.fsync = [](fuse_req_t req, fuse_ino_t, int datasync, struct fuse_file_info* fi) {
    Self(req)->OnFsync(req, datasync, fi);
  };
  ops.fallocate = [](fuse_req_t req, fuse_ino_t, int mode, off_t offset, off_t length,
                     struct fuse_file_info* fi) {
    Self(req)->OnFallocate(req, mode, offset, length, fi);
  };
  ops.opendir = [](fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
    Self(req)->OnOpendir(req, ino, fi);
  };
  ops.readdir = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info* fi) { Self(req)->OnReaddir(req, ino, size, off, fi); };
  ops.releasedir = [](fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
    Self(req)->OnReleasedir(req, fi);
  };
  ops.fsyncdir = [](fuse_req_t req, fuse_ino_t, int datasync, struct fuse_file_info* fi) {
    Self(req)->OnFsyncdir(req, datasync, fi);
  };
  ops.statfs = [](fuse_req_t req, fuse_ino_t ino) { Self(req)->OnStatfs(req, ino); };
  ops.getxattr = [](fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
    Self(req)->OnGetxattr(req, ino, name, size);
  };
  ops.listxattr = [](fuse_req_t req, fuse_ino_t ino, size_t size) {
    Self(req)->OnListxattr(req, ino, size);
  };
  ops.setxattr = [](fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                    size_t size, int flags) {
    Self(req)->OnSetxattr(req, ino, name, value, size, flags);
  };
  ops.removexattr = [](fuse_req_t req, fuse_ino_t ino, const char* name) {
    Self(req)->OnRemovexattr(req, ino, name);
  };
  return ops;
}

CaptureFs::CaptureFs(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CaptureFs::~CaptureFs() = default;

Result<std::unique_ptr<CaptureFs>> CaptureFs::Mount(const CaptureFsOptions& options) {
  if (options.backing.empty() || options.backing[0] != '/') {
    return Status::InvalidArgument("the backing directory must be an absolute path");
  }
  if (options.mountpoint.empty() || options.mountpoint[0] != '/') {
    return Status::InvalidArgument("the mount point must be an absolute path");
  }
  if (options.client == nullptr || options.index == nullptr || options.volume == 0) {
    return Status::InvalidArgument("a client, an index writer and a volume are required");
  }
  auto impl = std::make_unique<Impl>(options);
  PROPELLER_RETURN_IF_ERROR(impl->Init());
  PROPELLER_RETURN_IF_ERROR(impl->MountSession());
  return std::unique_ptr<CaptureFs>(new CaptureFs(std::move(impl)));
}

Status CaptureFs::Run() { return impl_->Run(); }
void CaptureFs::Stop() { impl_->Stop(); }
void CaptureFs::FlushEdges() { impl_->FlushEdges(); }
CaptureFsStats CaptureFs::stats() const { return impl_->stats(); }

}  // namespace propeller::fuse
