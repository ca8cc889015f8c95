// Links, files and sockets an ordinary user plants where root's service keeps its data and
// its sockets (docs/security.md "Data directories"): the service refuses them by name or
// replaces them, never writes through them, and creates what it owns with exact modes.
#include "tests/security_fixture.h"

namespace propeller::testing {
namespace {

// Data and runtime directories: anything another user could have planted stops the daemon
// before it opens a file there; what the service left wider in older versions is narrowed.
TEST_F(SecurityTest, PlantedLinksAndWritableDirectoriesAreRefused) {
  const std::string data = dir_.path() + "/data";
  const std::string tree = dir_.path() + "/tree";
  BuildTree(tree);
  {
    Up up(data, dir_.path() + "/up.log");
    ASSERT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up.log");
    ASSERT_EQ(RunAs(0, 0, {PROPELLER_CLI_BIN, "import", tree}, env_).code, 0);
    ASSERT_EQ(up.Stop(), 0);
  }
  // A shard of the node's store: where LMDB opens its files.
  const std::string acg_dir = data + "/node/store/shard-0";
  ASSERT_TRUE(fs::exists(acg_dir + "/lock.mdb"));
  // A precious file of root's that a planted link points to.
  const std::string precious = dir_.path() + "/precious";
  WriteFile(precious, "root's own\n");
  ::chmod(precious.c_str(), 0600);
  auto start_fails_with = [&](const std::string& want) {
    Up up(data, dir_.path() + "/up.log");
    const bool started = up.Start();
    if (started) up.Stop();
    EXPECT_FALSE(started) << "started despite: " << want;
    const std::string log = ReadAll(dir_.path() + "/up.log");
    EXPECT_NE(log.find(want), std::string::npos) << log;
    EXPECT_EQ(ReadAll(precious), "root's own\n");
  };
  auto start_works = [&] {
    Up up(data, dir_.path() + "/up.log");
    EXPECT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up.log");
    EXPECT_EQ(up.Stop(), 0);
  };

  // 1. lock.mdb replaced by a symbolic link to root's file.
  const std::string lock = acg_dir + "/lock.mdb";
  ASSERT_EQ(::unlink(lock.c_str()), 0);
  ASSERT_EQ(::symlink(precious.c_str(), lock.c_str()), 0);
  start_fails_with(lock + " is a symbolic link");
  ASSERT_EQ(::unlink(lock.c_str()), 0);
  // 2. A hard link to root's file.
  const std::string hard = acg_dir + "/extra";
  ASSERT_EQ(::link(precious.c_str(), hard.c_str()), 0);
  start_fails_with(hard + " has 2 hard links");
  ASSERT_EQ(::unlink(hard.c_str()), 0);
  // 3. A file of another user's.
  WriteFile(hard, "");
  ASSERT_EQ(::chown(hard.c_str(), alice_->uid(), alice_->gid()), 0);
  start_fails_with(hard + " is owned by uid " + std::to_string(alice_->uid()));
  ASSERT_EQ(::unlink(hard.c_str()), 0);
  // 4. A data directory others may write.
  ASSERT_EQ(::chmod(data.c_str(), 0770), 0);
  start_fails_with("other users may write it");
  // 5. Modes an older version left (0755/0644, and 0777 from a umask-0 mount) are narrowed.
  ASSERT_EQ(::chmod(data.c_str(), 0755), 0);
  for (const auto& e : fs::recursive_directory_iterator(data)) {
    ::chmod(e.path().c_str(), e.is_directory() ? 0755 : 0644);
  }
  ::chmod(acg_dir.c_str(), 0777);
  start_works();
  EXPECT_EQ(WrongModes(data, 0700, 0600), std::vector<std::string>{});
  // 6. Runtime directories: writable by others, or a link of another user's.
  ASSERT_EQ(::chmod(run_.c_str(), 0777), 0);
  start_fails_with("other users may write it");
  ASSERT_EQ(::chmod(run_.c_str(), 0755), 0);
  const std::string sock = run_ + "/master.sock";
  ::unlink(sock.c_str());
  ASSERT_EQ(::symlink(precious.c_str(), sock.c_str()), 0);
  start_fails_with("is not a socket");
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  const std::string alice_dir = dir_.path() + "/alices";
  fs::create_directories(alice_dir);
  ASSERT_EQ(::chown(alice_dir.c_str(), alice_->uid(), alice_->gid()), 0);
  const std::string link_run = dir_.path() + "/run-link";
  ASSERT_EQ(::symlink(alice_dir.c_str(), link_run.c_str()), 0);
  ASSERT_EQ(::lchown(link_run.c_str(), alice_->uid(), alice_->gid()), 0);
  ::setenv("PROPELLER_RUNTIME_DIR", link_run.c_str(), 1);
  start_fails_with("symbolic link owned by uid " + std::to_string(alice_->uid()));
  ::setenv("PROPELLER_RUNTIME_DIR", run_.c_str(), 1);
  // 7. Whatever the umask, the modes are the service's.
  {
    const std::string data2 = dir_.path() + "/data2";
    ChildProcess up({"/bin/sh", "-c",
                     std::string("umask 0; exec ") + PROPELLER_CLI_BIN + " up --data " + data2 +
                         " --ready-file " + dir_.path() + "/ready2"},
                    dir_.path() + "/up2.log");
    ASSERT_TRUE(up.Start());
    for (int i = 0; i < 500 && !fs::exists(dir_.path() + "/ready2"); ++i) {
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(fs::exists(dir_.path() + "/ready2")) << ReadAll(dir_.path() + "/up2.log");
    ASSERT_EQ(RunAs(0, 0, {PROPELLER_CLI_BIN, "import", tree}, env_).code, 0);
    EXPECT_EQ(up.Terminate(), 0);
    EXPECT_EQ(WrongModes(data2, 0700, 0600), std::vector<std::string>{});
  }
}


// Runtime directories (sockets and mount records) are root's and 0755: an ordinary user adds
// no name there and removes none. What she planted while one was open to her (modes an older
// version or an administrator left, since narrowed: a daemon refuses a directory others may
// write) is never followed: a link or a file at a socket's path, and a socket she serves, stop
// the daemon and are left as they were; her stale socket is replaced by the service's own; a
// link at a mount record's path or at its temporary name is replaced, never written through.
TEST_F(SecurityTest, LinksPlantedInTheRuntimeDirectoryAreNeverFollowed) {
  const std::string tree = dir_.path() + "/tree";
  const std::string data = dir_.path() + "/data";
  const std::string mounts = MountRegistryDir();
  ASSERT_EQ(mounts, run_ + "/mounts");
  BuildTree(tree);
  // Root's precious file, and alice's own files outside the runtime directory.
  const std::string precious = dir_.path() + "/precious";
  WriteFile(precious, "root's own\n");
  ASSERT_EQ(::chmod(precious.c_str(), 0600), 0);
  const std::string alices = dir_.path() + "/alices";
  fs::create_directories(alices);
  WriteFile(alices + "/own", "alice's own\n");
  WriteFile(alices + "/move", "");
  for (const std::string& p : {alices, alices + "/own", alices + "/move"}) {
    ASSERT_EQ(::chown(p.c_str(), alice_->uid(), alice_->gid()), 0);
  }
  auto as_alice = [&](const std::function<int()>& op) {
    return ErrnoAs(alice_->uid(), alice_->gid(), op);
  };
  auto untouched = [&] {
    EXPECT_EQ(ReadAll(precious), "root's own\n");
    EXPECT_EQ(ReadAll(alices + "/own"), "alice's own\n");
  };
  auto links_of = [](const std::string& path) -> nlink_t {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 ? st.st_nlink : 0;
  };
  auto owner_of = [](const std::string& path) -> int64_t {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_uid) : -1;
  };
  const int64_t alice_uid = alice_->uid();

  // 1. The directories as the service leaves them: alice adds and removes no name.
  const std::string sock = run_ + "/master.sock";
  {
    Up up(data, dir_.path() + "/up.log");
    ASSERT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up.log");
    ASSERT_EQ(RunAs(0, 0, {PROPELLER_CLI_BIN, "import", tree}, env_).code, 0);
    ASSERT_TRUE(MakeRegistryDirs().ok());  // what a mount makes for its record
    EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
    for (const std::string& d : {run_, mounts}) {
      SCOPED_TRACE(d);
      const std::string n = d + "/planted";
      EXPECT_EQ(as_alice([&] {
                  const int fd = ::open(n.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
                  return fd < 0 ? -1 : 0;
                }),
                EACCES);
      EXPECT_EQ(as_alice([&] { return ::symlink(precious.c_str(), n.c_str()); }), EACCES);
      EXPECT_EQ(as_alice([&] { return ::link((alices + "/own").c_str(), n.c_str()); }), EACCES);
      EXPECT_EQ(as_alice([&] { return ::rename((alices + "/move").c_str(), n.c_str()); }),
                EACCES);
      EXPECT_EQ(as_alice([&] { return ::mkdir(n.c_str(), 0755); }), EACCES);
      EXPECT_EQ(as_alice([&] { return ListenAt(n); }), EACCES);
      EXPECT_EQ(owner_of(n), -1) << "alice added " << n;
    }
    EXPECT_EQ(as_alice([&] { return ::unlink(sock.c_str()); }), EACCES);
    EXPECT_EQ(as_alice([&] { return ::rename((alices + "/own").c_str(), sock.c_str()); }),
              EACCES);
    ASSERT_EQ(up.Stop(), 0);
  }
  untouched();

  // 2. Socket paths. Alice plants while the runtime directory is open to her; root narrows it
  // and starts the service, which must refuse, leave the planted name alone and write nothing.
  int attempt = 0;
  auto start_refused = [&](const std::string& want) {
    const std::string log = dir_.path() + "/up-" + std::to_string(++attempt) + ".log";
    Up up(data, log);
    const bool started = up.Start();
    if (started) up.Stop();
    EXPECT_FALSE(started) << "started despite: " << want;
    EXPECT_NE(ReadAll(log).find(want), std::string::npos) << ReadAll(log);
    untouched();
  };
  auto plant = [&](const std::function<int()>& op) {
    ::unlink(sock.c_str());  // the stale socket of the last run
    ASSERT_EQ(::chmod(run_.c_str(), 0777), 0);
    EXPECT_EQ(as_alice(op), 0);
    ASSERT_EQ(::chmod(run_.c_str(), 0755), 0);
  };
  const std::string not_socket = sock + " exists and is not a socket";
  // Her symbolic link to root's file.
  plant([&] { return ::symlink(precious.c_str(), sock.c_str()); });
  start_refused(not_socket);
  EXPECT_TRUE(fs::is_symlink(sock));
  EXPECT_EQ(owner_of(sock), alice_uid);
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  // Her hard link to her own file.
  plant([&] { return ::link((alices + "/own").c_str(), sock.c_str()); });
  start_refused(not_socket);
  EXPECT_EQ(links_of(alices + "/own"), 2u);
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  // A hard link to root's own file (fs.protected_hardlinks keeps alice from making it; a
  // host without it, or an administrator's slip, does not).
  ASSERT_EQ(::link(precious.c_str(), sock.c_str()), 0);
  start_refused(not_socket);
  EXPECT_EQ(links_of(precious), 2u);
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  // A socket she serves: the service does not take it over.
  ASSERT_EQ(owner_of(sock), -1);
  ASSERT_EQ(::chmod(run_.c_str(), 0777), 0);
  SocketServerAs hers(alice_->uid(), alice_->gid(), sock);
  ASSERT_TRUE(hers.serving());
  ASSERT_EQ(::chmod(run_.c_str(), 0755), 0);
  start_refused("another process serves there");
  EXPECT_EQ(owner_of(sock), alice_uid);
  EXPECT_TRUE(ConnectsAs(alice_->uid(), alice_->gid(), sock)) << "her socket was taken";
  // Once her server is gone, its stale socket is replaced by the service's own, which every
  // user reaches.
  hers.Kill();
  ASSERT_EQ(owner_of(sock), alice_uid);
  {
    Up up(data, dir_.path() + "/up-stale.log");
    ASSERT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up-stale.log");
    struct stat st;
    ASSERT_EQ(::lstat(sock.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFSOCK | 0666));
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
    RunResult s = RunAs(alice_->uid(), alice_->gid(),
                        {PROPELLER_CLI_BIN, "search", "name=notes.txt"}, env_);
    EXPECT_EQ(s.code, 0) << s.err;
    EXPECT_EQ(s.out, tree + "/home/" + alice_->name() + "/notes.txt\n");
    EXPECT_EQ(up.Stop(), 0);
  }
  untouched();

  // 3. A mount's record. Alice's symbolic link to root's file at the record's path, and a
  // hard link to root's file at the temporary name the mount writes it under first (named
  // after the mount's pid, known before it runs: the shell it starts as waits for `go`, then
  // becomes the mount).
  const std::string backing = dir_.path() + "/backing";
  const std::string mnt = dir_.path() + "/mnt";
  fs::create_directories(backing);
  fs::create_directories(mnt);
  WriteFile(backing + "/file.txt", "x\n");
  ASSERT_EQ(::chmod(mnt.c_str(), 0755), 0);
  const std::string go = dir_.path() + "/go";
  const std::string ready = dir_.path() + "/mount.ready";
  ChildProcess mount({"/bin/sh", "-c",
                      "while [ ! -e " + go + " ]; do sleep 0.02; done; exec " +
                          PROPELLER_CLI_BIN + " mount " + backing + " " + mnt + " --data " +
                          dir_.path() + "/mount-data --ready-file " + ready +
                          " --log-level warning"},
                     dir_.path() + "/mount.log");
  ASSERT_TRUE(mount.Start());
  struct Unmount {
    std::string mnt;
    ~Unmount() { (void)std::system(("fusermount3 -u " + mnt + " 2>/dev/null").c_str()); }
  } unmount{mnt};
  const std::string mountpoint = fs::canonical(mnt).string();
  const std::string record = mounts + "/" + PathAsFileName(mountpoint);
  const std::string tmp = record + ".tmp-" + std::to_string(mount.pid());
  ASSERT_EQ(::chmod(mounts.c_str(), 0777), 0);
  EXPECT_EQ(as_alice([&] { return ::symlink(precious.c_str(), record.c_str()); }), 0);
  ASSERT_EQ(::link(precious.c_str(), tmp.c_str()), 0);
  ASSERT_EQ(::chmod(mounts.c_str(), 0755), 0);
  WriteFile(go, "");
  for (int i = 0; i < 500 && !fs::exists(ready); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(fs::exists(ready)) << ReadAll(dir_.path() + "/mount.log");
  untouched();
  EXPECT_EQ(links_of(precious), 1u) << "the hard link at " << tmp << " is still there";
  EXPECT_EQ(owner_of(tmp), -1);
  struct stat st;
  ASSERT_EQ(::lstat(record.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFREG | 0644));
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_nlink, 1u);
  MountRecord written;
  ASSERT_TRUE(DecodeMountRecord(ReadAll(record), &written).ok()) << ReadAll(record);
  EXPECT_EQ(written.mountpoint, mountpoint);
  EXPECT_EQ(written.pid, static_cast<uint32_t>(mount.pid()));
  EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
  EXPECT_EQ(mount.Terminate(), 0);
  EXPECT_EQ(owner_of(record), -1) << "the record outlived the mount";
  untouched();
  EXPECT_EQ(links_of(precious), 1u);
}


}  // namespace
}  // namespace propeller::testing
