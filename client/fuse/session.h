// Session: the mount's FUSE session (capture_fs.h): mounting, the worker loop, the polling
// reader, and stopping. It reads and writes /dev/fuse itself (libfuse's custom I/O) so that
// KillprivV2 and KernelPassthrough (kernel_io.h) see every request and reply: without that
// the mount works the same, with a GETXATTR round trip before every write, every read and
// write going through the daemon, and the poller reading the session's device like one more
// worker.
//
// Every request's fuse_req_userdata is this Session; app() is the file system behind it.
//
// The polling reader:
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
#ifndef PROPELLER_CLIENT_FUSE_SESSION_H_
#define PROPELLER_CLIENT_FUSE_SESSION_H_

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314  // as capture_fs.cc
#endif
#include <fuse3/fuse_lowlevel.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "client/fuse/kernel_io.h"
#include "common/status.h"

namespace propeller::fuse {

struct SessionOptions {
  std::string backing;     // shown as the file system's source
  std::string mountpoint;
  bool allow_other = true;
  bool debug = false;      // libfuse's request log on stderr
  int max_threads = 10;    // libfuse worker threads
  int64_t poll_us = 50;    // the polling reader's window; 0 = no poller
};

class Session {
 public:
  // Mounts options.mountpoint serving `ops` for `app`. `killpriv` and `passthrough` see every
  // request and reply; not owned, they outlive the session. IOError saying why it failed.
  static Result<std::unique_ptr<Session>> Mount(const SessionOptions& options,
                                               const fuse_lowlevel_ops& ops, void* app,
                                               KillprivV2* killpriv,
                                               KernelPassthrough* passthrough);
  // Unmounts (if still mounted) and ends the session.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The file system of a request.
  static void* AppOf(fuse_req_t req) {
    return static_cast<Session*>(fuse_req_userdata(req))->app_;
  }
  static void* AppOfUserdata(void* userdata) { return static_cast<Session*>(userdata)->app_; }

  int dev_fd() const { return dev_fd_; }
  // Serves requests until unmounted or stopped; an error only if the loop failed.
  Status Run();
  // Makes Run() return soon; safe from any thread (not from a signal handler).
  void Stop();
  uint64_t polled_requests() const { return polled_requests_.load(); }

 private:
  Session(const SessionOptions& options, void* app, KillprivV2* killpriv,
          KernelPassthrough* passthrough)
      : options_(options), app_(app), killpriv_(killpriv), passthrough_(passthrough) {}
  static ssize_t DevRead(int fd, void* buf, size_t len, void* userdata);
  static ssize_t DevWritev(int fd, struct iovec* iov, int count, void* userdata);
  int ClonePollerDevice();
  void PollerMain(int fd);

  const SessionOptions options_;
  void* const app_;
  KillprivV2* const killpriv_;
  KernelPassthrough* const passthrough_;
  struct fuse_session* session_ = nullptr;
  bool mounted_ = false;
  int dev_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> polled_requests_{0};
};

}  // namespace propeller::fuse

#endif  // PROPELLER_CLIENT_FUSE_SESSION_H_
