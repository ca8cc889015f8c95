// The trust model of docs/security.md, tried the way an attacker on a shared host would: real
// `propeller up`, `propeller mount` and cluster daemons run by root, two ordinary users made
// for the test (useradd) who connect to every endpoint directly with forged requests
// (tests/security_probe.cc), plant links in data and runtime directories, and read query
// directories after root listed them. The oracle of what a user may see is `find` run as that
// user over the same tree.
#include "tests/security_fixture.h"

namespace propeller::testing {
namespace {

TEST_F(SecurityTest, UpServesLocalUsersTheirOwnViewAndNoTcp) {
  const std::string tree = dir_.path() + "/tree";
  BuildTree(tree);
  Up up(dir_.path() + "/data", dir_.path() + "/up.log");
  ASSERT_TRUE(up.Start()) << ReadAll(dir_.path() + "/up.log");
  EXPECT_EQ(TcpListeners(up.pid()), std::vector<std::string>{}) << "up opened a TCP port";
  EXPECT_EQ(up.Endpoint("master"), "ipc://" + run_ + "/master.sock");

  RunResult imp = RunAs(0, 0, {PROPELLER_CLI_BIN, "import", tree}, env_);
  ASSERT_EQ(imp.code, 0) << imp.err;
  ClientOptions co;  // found by itself, as the CLI does
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok());
  const std::string secret_path = tree + "/home/" + bob_->name() + "/secret.txt";
  auto secret_id = (*client)->FileIdOf(secret_path);
  ASSERT_TRUE(secret_id.ok()) << secret_id.status().ToString();
  auto hits = (*client)->SearchAll("size>=0", {});
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  uint64_t acg = 0;
  std::set<std::string> root_view;
  for (const ClientHit& h : *hits) {
    root_view.insert(h.path);
    if (h.path == secret_path) acg = h.acg;
  }
  ASSERT_EQ(root_view, FindAs(nullptr, tree));
  ASSERT_NE(acg, 0u);

  // Straight to both sockets, with forged credentials and every write there is.
  const std::set<std::string> alice_sees = FindAs(alice_, tree);
  ASSERT_FALSE(alice_sees.count(secret_path));
  ASSERT_FALSE(alice_sees.count(tree + "/pub/drop/hidden.txt"));
  for (const char* which : {"master", "node"}) {
    ProbeAs(alice_, up.Endpoint(which), InVolume(alice_sees, tree), acg, *secret_id, tree,
            true);
  }
  // Nothing changed: the same records, no index, no volume, no attribute.
  hits = (*client)->SearchAll("size>=0", {});
  ASSERT_TRUE(hits.ok());
  std::set<std::string> after;
  for (const ClientHit& h : *hits) {
    after.insert(h.path);
    EXPECT_TRUE(h.record.attrs.empty()) << h.path;
    EXPECT_LT(h.record.size, 123u << 20) << h.path;
  }
  EXPECT_EQ(after, root_view);
  auto indexes = (*client)->ListIndexes();
  ASSERT_TRUE(indexes.ok());
  EXPECT_TRUE(indexes->empty());
  auto volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  ASSERT_EQ(volumes->size(), 1u);
  EXPECT_EQ((*volumes)[0], (wire::VolumeInfo{secret_id->volume, tree}));

  // The CLI as each user: exactly what `find` shows them.
  for (const SystemUser* u : {alice_, bob_}) {
    RunResult s = RunAs(u->uid(), u->gid(), {PROPELLER_CLI_BIN, "search", "size>=0"}, env_);
    ASSERT_EQ(s.code, 0) << s.err;
    const auto lines = Lines(s.out);
    EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()), FindAs(u, tree)) << u->name();
  }
  // A user sets attributes on her own files only; everything else that changes the index is
  // refused with a clear message.
  const std::string notes = tree + "/home/" + alice_->name() + "/notes.txt";
  RunResult own = RunAs(alice_->uid(), alice_->gid(),
                  {PROPELLER_CLI_BIN, "attr", "set", notes, "tag", "mine"}, env_);
  EXPECT_EQ(own.code, 0) << own.err;
  RunResult theirs = RunAs(alice_->uid(), alice_->gid(),
                     {PROPELLER_CLI_BIN, "attr", "set", tree + "/pub/readme.txt", "tag", "x"},
                     env_);
  EXPECT_EQ(theirs.code, 1);
  EXPECT_NE(theirs.err.find("may not"), std::string::npos) << theirs.err;
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"index", "create", "tag"},
        std::vector<std::string>{"import", tree + "/pub"}}) {
    std::vector<std::string> argv = {PROPELLER_CLI_BIN};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    RunResult r = RunAs(alice_->uid(), alice_->gid(), argv, env_);
    EXPECT_EQ(r.code, 1) << cmd[0];
    EXPECT_NE(r.err.find("only root or the service's user"), std::string::npos) << r.err;
  }
  auto tagged = (*client)->SearchAll("tag=mine", {});
  ASSERT_TRUE(tagged.ok());
  ASSERT_EQ(tagged->size(), 1u);
  EXPECT_EQ((*tagged)[0].path, notes);

  // What the service stored: root's, 0700 directories and 0600 files; sockets 0666 in a
  // runtime directory only root may write, which every user connects to.
  EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
  for (const char* name : {"/master.sock", "/node.sock"}) {
    struct stat sock;
    ASSERT_EQ(::lstat((run_ + name).c_str(), &sock), 0) << name;
    EXPECT_TRUE(S_ISSOCK(sock.st_mode)) << name;
    for (const SystemUser* u : {alice_, bob_}) {
      EXPECT_TRUE(ConnectsAs(u->uid(), u->gid(), run_ + name)) << u->name() << name;
    }
  }
  client->reset();
  ASSERT_EQ(up.Stop(), 0);
  EXPECT_EQ(WrongModes(dir_.path() + "/data", 0700, 0600), std::vector<std::string>{});
  struct stat st;
  ASSERT_EQ(::stat(run_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

// `propeller mount`: its query engine, master and node sockets get the same probes, and a
// query directory another user listed tells nothing about its entries.
TEST_F(SecurityTest, MountEndpointsAndQueryDirectoriesArePerCaller) {
  const std::string backing = dir_.path() + "/backing";
  const std::string mnt = dir_.path() + "/mnt";
  BuildTree(backing);
  fs::create_directories(mnt);
  ::chmod(mnt.c_str(), 0755);
  const std::string ready = dir_.path() + "/mount.ready";
  ChildProcess mount({PROPELLER_CLI_BIN, "mount", backing, mnt, "--data", dir_.path() + "/data",
                      "--ready-file", ready, "--log-level", "warning"},
                     dir_.path() + "/mount.log");
  ASSERT_TRUE(mount.Start());
  for (int i = 0; i < 500 && !fs::exists(ready); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(fs::exists(ready)) << ReadAll(dir_.path() + "/mount.log");
  struct Unmount {
    std::string mnt;
    ~Unmount() { (void)std::system(("fusermount3 -u " + mnt + " 2>/dev/null").c_str()); }
  } unmount{mnt};
  EXPECT_EQ(TcpListeners(mount.pid()), std::vector<std::string>{}) << "mount opened a TCP port";
  // The runtime directory: root's, 0755; sockets every user may connect to, records public.
  EXPECT_EQ(WrongRuntimeModes(run_), std::vector<std::string>{});
  for (const auto& e : fs::directory_iterator(run_)) {
    if (e.is_socket()) {
      EXPECT_TRUE(ConnectsAs(alice_->uid(), alice_->gid(), e.path().string())) << e.path();
    }
  }
  std::map<std::string, std::string> endpoints;
  for (const std::string& line : Lines(ReadAll(ready))) {
    endpoints[line.substr(0, line.find(' '))] = line.substr(line.find(' ') + 1);
  }

  ClientOptions co;
  co.master_endpoint = endpoints["master"];
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok());
  auto status = (*client)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->nodes.size(), 1u);
  const std::string secret = backing + "/home/" + bob_->name() + "/secret.txt";
  auto secret_id = (*client)->FileIdOf(secret);
  ASSERT_TRUE(secret_id.ok());
  uint64_t acg = 0;
  auto hits = (*client)->SearchAll("name=secret.txt", {});
  ASSERT_TRUE(hits.ok() && hits->size() == 1u);
  acg = (*hits)[0].acg;

  const std::set<std::string> alice_sees = InVolume(FindAs(alice_, backing), backing);
  for (const std::string& ep :
       {endpoints["engine"], endpoints["master"], status->nodes[0].info.endpoint}) {
    ProbeAs(alice_, ep, alice_sees, acg, *secret_id, backing, true);
  }
  auto volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  EXPECT_EQ(*volumes, (std::vector<wire::VolumeInfo>{{secret_id->volume, backing}}));
  hits = (*client)->SearchAll("name=secret.txt", {});
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->size(), 1u) << "the volume's records are gone";

  // Root lists a query directory; then the other users look at bob's entry by name.
  const std::string qdir = mnt + "/?size>=0";
  const std::string entry = qdir + "/home%2F" + bob_->name() + "%2Fsecret.txt";
  {
    DIR* d = ::opendir(qdir.c_str());
    ASSERT_NE(d, nullptr) << std::strerror(errno);
    std::set<std::string> names;
    while (struct dirent* e = ::readdir(d)) names.insert(e->d_name);
    ::closedir(d);
    ASSERT_TRUE(names.count("home%2F" + bob_->name() + "%2Fsecret.txt"));
  }
  struct stat st;
  ASSERT_EQ(::lstat(entry.c_str(), &st), 0);  // root may
  const std::string script =
      "stat -c %U '" + entry + "' ; readlink '" + entry + "' ; getfattr -n user.x '" + entry +
      "' ; ls -1 '" + qdir + "'; test -L '" + entry + "' && echo EXISTS; true";
  RunResult a = RunAs(alice_->uid(), alice_->gid(), {"/bin/sh", "-c", script});
  EXPECT_EQ(a.out.find("secret.txt"), std::string::npos) << a.out << a.err;
  for (const std::string& line : Lines(a.out)) EXPECT_NE(line, bob_->name()) << "stat showed";
  EXPECT_EQ(a.out.find("EXISTS"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("home%2F" + alice_->name() + "%2Fnotes.txt"), std::string::npos) << a.out;
  // The same from C, errno by errno.
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(alice_->gid()) != 0 ||
        ::setuid(alice_->uid()) != 0) {
      ::_exit(100);
    }
    struct stat s;
    char buf[256];
    if (::lstat(entry.c_str(), &s) == 0 || errno != ENOENT) ::_exit(1);
    if (::readlink(entry.c_str(), buf, sizeof(buf)) >= 0 || errno != ENOENT) ::_exit(2);
    if (::lgetxattr(entry.c_str(), "user.x", buf, sizeof(buf)) >= 0 || errno != ENOENT) {
      ::_exit(3);
    }
    if (::llistxattr(entry.c_str(), buf, sizeof(buf)) >= 0 || errno != ENOENT) ::_exit(4);
    if (::open(entry.c_str(), O_RDONLY) >= 0) ::_exit(5);
    ::_exit(0);
  }
  int wst = 0;
  ASSERT_EQ(::waitpid(pid, &wst, 0), pid);
  EXPECT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 0) << "step " << WEXITSTATUS(wst);
  // Bob, whose file it is, sees it.
  RunResult b = RunAs(bob_->uid(), bob_->gid(), {"/bin/sh", "-c", "readlink '" + entry + "'"});
  EXPECT_NE(b.out.find("secret.txt"), std::string::npos) << b.err;

  client->reset();
  ASSERT_EQ(::kill(mount.pid(), SIGTERM), 0);
  for (int i = 0; i < 1500 && !mount.Exited(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(WrongModes(dir_.path() + "/data", 0700, 0600), std::vector<std::string>{});
  EXPECT_TRUE(fs::is_empty(run_ + "/mounts")) << "the mount record outlived the mount";
}

// A cluster over TCP: CURVE with the cluster key the master made at its first start; a local
// user without it, or with a key of their own, gets nothing from any daemon. The daemons run
// with umask 0, as the mount's FUSE server does: their files get the service's modes anyway.
TEST_F(SecurityTest, ClusterLinksNeedTheClusterKey) {
  const std::string key = dir_.path() + "/keys/cluster.key";
  const std::vector<int> ports = FreePorts(3);
  const std::string master_ep = "tcp://127.0.0.1:" + std::to_string(ports[0]);
  const std::string node_ep = "tcp://127.0.0.1:" + std::to_string(ports[1]);
  ChildProcess master({"/bin/sh", "-c",
                       std::string("umask 0; exec ") + PROPELLER_MASTER_BIN + " --data " +
                           dir_.path() + "/master --listen " + master_ep + " --cluster-key " + key},
                      dir_.path() + "/master.log");
  ASSERT_TRUE(master.Start());
  for (int i = 0; i < 500 && !fs::exists(key); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(fs::exists(key)) << ReadAll(dir_.path() + "/master.log");
  struct stat st;
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat((dir_.path() + "/keys").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "the directory the master made for the key";
  ChildProcess node({"/bin/sh", "-c",
                     std::string("umask 0; exec ") + PROPELLER_INDEXNODE_BIN + " --data " +
                         dir_.path() + "/node --listen " + node_ep + " --master " + master_ep +
                         " --cluster-key " + key},
                    dir_.path() + "/node.log");
  ASSERT_TRUE(node.Start());
  ClientOptions co;
  co.master_endpoint = master_ep;
  co.cluster_key_file = key;
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(Eventually([&] {
                auto s = (*client)->GetStatus();
                return s.ok() && s->nodes.size() == 1 && s->nodes[0].node ? Status::OK()
                                                                          : Status::Unavailable("");
              }).ok())
      << ReadAll(dir_.path() + "/node.log");
  auto volume = (*client)->RegisterVolume(kRoot);
  ASSERT_TRUE(volume.ok());
  FileUpdate u;
  u.record.id = FileId{*volume, 7};
  u.record.paths = {"/secret"};
  ASSERT_TRUE((*client)->Update({&u, 1}).ok());

  // Alice cannot read the key; without it, and with a key of her own, nothing answers.
  RunResult cat = RunAs(alice_->uid(), alice_->gid(), {"/bin/cat", key});
  EXPECT_NE(cat.code, 0);
  const std::string own = dir_.path() + "/alice.key";
  auto alice_keys = rpc::GenerateCurveKeys();
  ASSERT_TRUE(alice_keys.ok());
  ASSERT_TRUE(rpc::WriteKeyFile(own, *alice_keys).ok());
  ASSERT_EQ(::chown(own.c_str(), alice_->uid(), alice_->gid()), 0);
  const std::string server_pub = dir_.path() + "/server.pub";
  auto cluster_keys = rpc::ReadKeyFile(key);
  ASSERT_TRUE(cluster_keys.ok());
  ASSERT_TRUE(rpc::WriteKeyFile(server_pub, {cluster_keys->public_key, ""}).ok());
  ASSERT_EQ(::chmod(server_pub.c_str(), 0644), 0);
  for (const std::string& ep : {master_ep, node_ep}) {
    ProbeAs(alice_, ep, {}, 1, u.record.id, kRoot, false, {"--timeout-ms", "200"});
    ProbeAs(alice_, ep, {}, 1, u.record.id, kRoot, false,
            {"--timeout-ms", "200", "--curve", own, "--server-key", server_pub});
  }
  auto volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  EXPECT_EQ(*volumes, (std::vector<wire::VolumeInfo>{{*volume, kRoot}}));
  RunResult cli = RunAs(alice_->uid(), alice_->gid(),
                  {PROPELLER_CLI_BIN, "--master", master_ep, "search", "size>=0"}, env_);
  EXPECT_EQ(cli.code, 1);
  EXPECT_NE(cli.err.find("cluster key"), std::string::npos) << cli.err << cli.out;

  // A daemon asked for a network port without keys refuses to start; --insecure is explicit.
  const std::string no_key = "PROPELLER_CLUSTER_KEY=" + dir_.path() + "/none.key";
  RunResult refused = RunAs(0, 0,
                      {PROPELLER_INDEXNODE_BIN, "--data", dir_.path() + "/node2", "--listen",
                       "tcp://0.0.0.0:" + std::to_string(ports[2]), "--master", master_ep},
                      {no_key}, 20s);
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("--insecure"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(dir_.path() + "/node2/node_id"));
  client->reset();
  EXPECT_EQ(node.Terminate(), 0);
  EXPECT_EQ(master.Terminate(), 0);
  // What the standalone daemons stored: root's, 0700 directories and 0600 files.
  for (const char* data : {"/master", "/node"}) {
    ASSERT_TRUE(fs::exists(dir_.path() + data)) << data;
    EXPECT_EQ(WrongModes(dir_.path() + data, 0700, 0600), std::vector<std::string>{});
  }
  EXPECT_TRUE(fs::exists(dir_.path() + "/node/node_id"));
}

// A cluster on one host without keys: its daemons on unix sockets, where the kernel names
// every caller. A user gets what the same probes get from `up`.
TEST_F(SecurityTest, ClusterOnUnixSocketsNeedsNoKeys) {
  const std::string tree = dir_.path() + "/tree";
  BuildTree(tree);
  ClusterConfig config;
  config.nodes = 1;
  config.ipc = true;
  LocalCluster cluster(config);
  ASSERT_TRUE(cluster.Start());
  // The cluster's directory (its sockets) must be reachable by the users.
  ASSERT_EQ(::chmod(cluster.dir().c_str(), 0755), 0);
  ClientOptions co;
  co.master_endpoint = cluster.master_endpoint();
  auto client = Client::Connect(co);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(cluster.WaitNodesUp(**client, 1)) << cluster.Logs();
  RunResult imp = RunAs(0, 0, {PROPELLER_CLI_BIN, "--master", cluster.master_endpoint(), "import",
                               tree}, env_);
  ASSERT_EQ(imp.code, 0) << imp.err;
  const std::string secret = tree + "/home/" + bob_->name() + "/secret.txt";
  auto hits = (*client)->SearchAll("name=secret.txt", {});
  ASSERT_TRUE(hits.ok() && hits->size() == 1u);
  const std::set<std::string> alice_sees = InVolume(FindAs(alice_, tree), tree);
  const FileId secret_id = (*hits)[0].record.id;
  for (const std::string& ep : {cluster.master_endpoint(), cluster.node_endpoint(0)}) {
    ProbeAs(alice_, ep, alice_sees, (*hits)[0].acg, secret_id, tree, true);
    EXPECT_TRUE(ConnectsAs(alice_->uid(), alice_->gid(), ep.substr(6))) << ep;
    struct stat sock;
    ASSERT_EQ(::lstat(ep.substr(6).c_str(), &sock), 0);
    EXPECT_EQ(sock.st_mode, S_IFSOCK | 0666) << ep;
  }
  RunResult s = RunAs(alice_->uid(), alice_->gid(),
                      {PROPELLER_CLI_BIN, "--master", cluster.master_endpoint(), "search",
                       "size>=0"}, env_);
  ASSERT_EQ(s.code, 0) << s.err;
  const auto lines = Lines(s.out);
  EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()), FindAs(alice_, tree));

  // The volume alice tried to remove is there; the same request from root removes it, so
  // hers named it right and was refused for who sent it.
  const wire::VolumeInfo vol{secret_id.volume, tree};
  auto volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  EXPECT_EQ(*volumes, std::vector<wire::VolumeInfo>{vol});
  RunResult remove = RunAs(0, 0, {SECURITY_PROBE_BIN, cluster.master_endpoint(), "--file",
                                  std::to_string(vol.volume) + ":" + std::to_string(secret_id.ino),
                                  "--root", tree, "--only", "remove-volume"});
  EXPECT_EQ(remove.out, "remove-volume 0\n") << remove.err;
  volumes = (*client)->ListVolumes();
  ASSERT_TRUE(volumes.ok());
  EXPECT_TRUE(volumes->empty());

  // What the standalone daemons stored: root's, 0700 directories and 0600 files.
  client->reset();
  EXPECT_EQ(cluster.node(0).Terminate(), 0);
  EXPECT_EQ(cluster.master().Terminate(), 0);
  EXPECT_EQ(WrongModes(cluster.dir() + "/master", 0700, 0600), std::vector<std::string>{});
  EXPECT_EQ(WrongModes(cluster.node_dir(0), 0700, 0600), std::vector<std::string>{});
}

}  // namespace
}  // namespace propeller::testing
