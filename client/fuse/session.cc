#include "client/fuse/session.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/logging.h"

namespace propeller::fuse {
namespace {

int64_t MonoNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The poller's clone of /dev/fuse on the poller's thread, -1 elsewhere (see the header).
thread_local int t_dev_fd = -1;

}  // namespace

Result<std::unique_ptr<Session>> Session::Mount(const SessionOptions& options,
                                                const fuse_lowlevel_ops& ops, void* app,
                                                KillprivV2* killpriv,
                                                KernelPassthrough* passthrough) {
  std::unique_ptr<Session> s(new Session(options, app, killpriv, passthrough));
  std::vector<std::string> args = {"propeller", "-o", "fsname=propeller:" + options.backing,
                                   "-o", "subtype=propeller", "-o", "default_permissions"};
  if (options.allow_other) {
    args.push_back("-o");
    args.push_back("allow_other");
  }
  if (options.debug) args.push_back("-d");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  struct fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  s->session_ = fuse_session_new(&fargs, &ops, sizeof(ops), s.get());
  fuse_opt_free_args(&fargs);
  if (s->session_ == nullptr) return Status::IOError("fuse_session_new failed (see stderr)");
  if (fuse_session_mount(s->session_, options.mountpoint.c_str()) != 0) {
    return Status::IOError("mounting at " + options.mountpoint +
                           " failed (needs /dev/fuse and root, or user_allow_other for "
                           "allow_other; see stderr)");
  }
  s->mounted_ = true;
  s->dev_fd_ = fuse_session_fd(s->session_);
  static const fuse_custom_io io = {.writev = &DevWritev, .read = &DevRead};
  if (fuse_session_custom_io(s->session_, &io, s->dev_fd_) != 0) {
    Log(LogLevel::kWarning, "fuse: custom /dev/fuse I/O refused; writes take an extra round "
                            "trip each (security.capability) and no kernel passthrough");
  }
  return s;
}

Session::~Session() {
  if (session_ != nullptr) {
    if (mounted_) fuse_session_unmount(session_);
    fuse_session_destroy(session_);
  }
}

ssize_t Session::DevRead(int fd, void* buf, size_t len, void* userdata) {
  const ssize_t n = ::read(t_dev_fd >= 0 ? t_dev_fd : fd, buf, len);
  if (n > 0) {
    Session* self = static_cast<Session*>(userdata);
    self->killpriv_->OnRequest(buf, static_cast<size_t>(n));
    self->passthrough_->OnRequest(buf, static_cast<size_t>(n));
  }
  return n;
}

ssize_t Session::DevWritev(int fd, struct iovec* iov, int count, void* userdata) {
  Session* self = static_cast<Session*>(userdata);
  self->killpriv_->OnReply(iov, count);
  if (self->passthrough_->OnReply(iov, count)) {
    Log(LogLevel::kInfo, "fuse: kernel passthrough on: reads and writes of open files go to "
                         "the backing files without the daemon");
  }
  return ::writev(t_dev_fd >= 0 ? t_dev_fd : fd, iov, count);
}

// Opens the poller's clone of the device; -1 (logged) when the kernel refuses.
int Session::ClonePollerDevice() {
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

void Session::PollerMain(int fd) {
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

Status Session::Run() {
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
  if (rc != 0 && !stopping_.load()) {
    return Status::IOError("FUSE session loop failed: " + std::string(std::strerror(rc < 0 ? -rc : rc)));
  }
  return Status::OK();
}

void Session::Stop() {
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

}  // namespace propeller::fuse
