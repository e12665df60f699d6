// Hostile environment: FORKGUARD_LOG pointing at a symlink, a file, a
// directory owned by another uid, an unwritable directory (as an unprivileged
// user: root may write anywhere), a full disk (a 32 KiB tmpfs mounted here; we are
// root); log files 0600 whatever the umask; AT_SECURE ignores the environment.
// In every case: at most one warning line about the log, the program's stdout and
// exit status exactly as without the shim.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "tests/safety/safety_util.h"

namespace forkguard::safety {
namespace {

constexpr uid_t kNobody = 65534;

struct Pair {
  ProgramResult base, shim;
};

// behave_prog hazard stub0, without and with the shim (FORKGUARD_LOG=log).
Pair RunHazard(const std::string& log, bool as_nobody = false,
               const std::vector<std::string>& extra_env = {}) {
  RunOptions opt = SafetyRunOptions();
  opt.env = {"LD_LIBRARY_PATH=" + StubLibDir()};
  opt.env.insert(opt.env.end(), extra_env.begin(), extra_env.end());
  opt.run_as = as_nobody;
  opt.uid = kNobody;
  opt.gid = kNobody;
  std::string prog = Program("tests/safety/behave_prog");
  Pair p;
  p.base = RunProgram({prog, "hazard", "stub0"}, opt);
  opt.env.push_back("LD_PRELOAD=" + Preload());
  opt.env.push_back("FORKGUARD_LOG=" + log);
  p.shim = RunProgram({prog, "hazard", "stub0"}, opt);
  return p;
}

void ExpectUnchanged(const Pair& p) {
  ASSERT_TRUE(p.base.Exited(0)) << p.base.Describe();
  EXPECT_EQ(p.shim.status, p.base.status) << p.shim.Describe();
  EXPECT_EQ(p.shim.out, p.base.out) << p.shim.Describe();
  // The shim is really there: it saw the hazardous fork.
  EXPECT_NE(p.shim.err.find("forkguard: fork after RDMA init"), std::string::npos)
      << p.shim.Describe();
}

int LogWarnings(const ProgramResult& r) {
  return CountLines(r.err, "forkguard: ignoring FORKGUARD_LOG=");
}

// RunHazard, and the program unchanged by the shim, which printed `warnings` lines about
// FORKGUARD_LOG.
Pair RunHazardWarned(int warnings, const std::string& log, bool as_nobody = false,
                     const std::vector<std::string>& extra_env = {}) {
  Pair p = RunHazard(log, as_nobody, extra_env);
  ExpectUnchanged(p);
  EXPECT_EQ(LogWarnings(p.shim), warnings) << p.shim.err;
  return p;
}

// A new file at `path` holding `text`.
void WriteNewFile(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size())) << path;
  close(fd);
}

// A new directory owned by uid and gid 65534 with `mode`.
void MakeNobodysDir(const std::string& path, mode_t mode) {
  ASSERT_EQ(mkdir(path.c_str(), mode), 0) << path;
  ASSERT_EQ(chown(path.c_str(), kNobody, kNobody), 0) << "needs root";
  ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
}

// For a run as uid 65534 (needs root): a new world-readable directory (*base, for the caller
// to remove) holding *ro, a directory of uid 65534 that it cannot write (0555).
void MakeNobodysReadOnlyDir(const std::string& prefix, std::string* base, std::string* ro) {
  ASSERT_EQ(geteuid(), 0u) << "this test switches to uid 65534 and needs root";
  *base = MakeDir(prefix, /*world_readable=*/true);
  *ro = *base + "/ro";
  MakeNobodysDir(*ro, 0555);
}

bool Empty(const std::string& dir) {
  LogDir d = ReadLogDir(dir);
  return d.files.empty() && d.other_files.empty();
}

TEST(HostileLog, SymlinkOneWarningNothingWrittenThroughIt) {
  std::string base = MakeDir("hostile", false);
  std::string target = base + "/target";
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  std::string link = base + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  RunHazardWarned(1, link);
  EXPECT_TRUE(Empty(target)) << "written through the symlink";
  RemoveTree(base);
}

TEST(HostileLog, RegularFileOneWarningFileUnchanged) {
  std::string base = MakeDir("hostile", false);
  std::string file = base + "/file";
  ASSERT_NO_FATAL_FAILURE(WriteNewFile(file, "keep\n"));
  RunHazardWarned(1, file);
  EXPECT_EQ(ReadFileOrEmpty(file), "keep\n");
  RemoveTree(base);
}

TEST(HostileLog, DirectoryOwnedByAnotherUidOneWarningNothingWritten) {
  std::string base = MakeDir("hostile", false);
  std::string dir = base + "/theirs";
  ASSERT_NO_FATAL_FAILURE(MakeNobodysDir(dir, 0777));
  RunHazardWarned(1, dir);
  EXPECT_TRUE(Empty(dir));
  RemoveTree(base);
}

TEST(HostileLog, UnwritableDirectoryAsUnprivilegedUserOneWarningNothingWritten) {
  std::string base, dir;
  ASSERT_NO_FATAL_FAILURE(MakeNobodysReadOnlyDir("hostile-nobody", &base, &dir));
  RunHazardWarned(1, dir, /*as_nobody=*/true);
  EXPECT_TRUE(Empty(dir));
  RemoveTree(base);
}

TEST(HostileLog, ValidDirectoryFilesAre0600EvenWithUmaskZero) {
  std::string dir = MakeDir("hostile-ok", false);
  mode_t old = umask(0);
  RunHazardWarned(0, dir);
  umask(old);
  LogDir d = ReadLogDir(dir);
  EXPECT_TRUE(d.problems.empty()) << ::testing::PrintToString(d.problems);
  ASSERT_FALSE(d.files.empty());
  for (const auto& [name, mode] : d.file_modes) EXPECT_EQ(mode, 0600u) << name;
  RemoveTree(dir);
}

// FORKGUARD_LOG directories are created (every missing component, 0700) and
// templated; what cannot be made ready is one warning and no log.
mode_t ModeOf(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

TEST(HostileLog, MissingNestedDirectoryCreated0700AndUsed) {
  std::string base = MakeDir("hostile-create", false);
  RunHazardWarned(0, base + "/job/host/run");
  for (const char* d : {"/job", "/job/host", "/job/host/run"}) {
    EXPECT_TRUE(S_ISDIR(ModeOf(base + d))) << d;
    EXPECT_EQ(ModeOf(base + d) & 07777, 0700u) << d;
  }
  LogDir d = ReadLogDir(base + "/job/host/run");
  EXPECT_TRUE(d.problems.empty()) << ::testing::PrintToString(d.problems);
  EXPECT_FALSE(d.files.empty());
  RemoveTree(base);
}

TEST(HostileLog, EachTemplateExpanded) {
  std::string base = MakeDir("hostile-template", false);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  RunHazardWarned(0, base + "/%j/%h/r%r/p%p/100%%", false, {"SLURM_JOB_ID=77", "RANK=3"});
  std::string rank_dir = base + "/77/" + host + "/r3";
  ASSERT_TRUE(S_ISDIR(ModeOf(rank_dir))) << rank_dir;
  // One p<pid> directory: the process that started the shim; its forked child logs there too.
  std::vector<std::string> pids;
  if (DIR* dir = opendir(rank_dir.c_str())) {
    while (dirent* e = readdir(dir))
      if (e->d_name[0] == 'p') pids.push_back(e->d_name);
    closedir(dir);
  }
  ASSERT_EQ(pids.size(), 1u) << ::testing::PrintToString(pids);
  LogDir d = ReadLogDir(rank_dir + "/" + pids[0] + "/100%");
  EXPECT_TRUE(d.problems.empty()) << ::testing::PrintToString(d.problems);
  std::set<int64_t> logged;
  for (const LogLine& l : d.lines) {
    logged.insert(l.Int("pid"));
    EXPECT_EQ(cli::GetString(l.json, "job"), "77");
    EXPECT_EQ(l.Int("rank"), 3);
  }
  // %p is the pid of the process the shim started in (a forked child logs beside it:
  // shim/event_log_test TemplatesExpandedOnceForkedChildKeepsTheDirectory).
  EXPECT_TRUE(logged.count(std::stoll(pids[0].substr(1)))) << "the parent's pid names the dir";
  RemoveTree(base);
}

TEST(HostileLog, SymlinkedComponentOwnedByAnotherUserOneWarningNothingCreated) {
  std::string base = MakeDir("hostile-theirs", false);
  std::string target = base + "/target";
  ASSERT_EQ(mkdir(target.c_str(), 0777), 0);
  ASSERT_EQ(symlink(target.c_str(), (base + "/theirs").c_str()), 0);
  ASSERT_EQ(lchown((base + "/theirs").c_str(), kNobody, kNobody), 0) << "needs root";
  Pair p = RunHazardWarned(1, base + "/theirs/job");
  EXPECT_NE(p.shim.err.find("is a symlink owned by uid 65534"), std::string::npos) << p.shim.err;
  EXPECT_EQ(ModeOf(target + "/job"), 0u) << "created through another user's symlink";
  RemoveTree(base);
}

TEST(HostileLog, UnwritableParentAsUnprivilegedUserOneWarningNothingCreated) {
  std::string base, ro;
  ASSERT_NO_FATAL_FAILURE(MakeNobodysReadOnlyDir("hostile-ro-parent", &base, &ro));
  Pair p = RunHazardWarned(1, ro + "/job/host", /*as_nobody=*/true);
  EXPECT_NE(p.shim.err.find("cannot create " + ro + "/job: Permission denied"), std::string::npos)
      << p.shim.err;
  EXPECT_EQ(ModeOf(ro + "/job"), 0u);
  RemoveTree(base);
}

TEST(HostileLog, RegularFileInThePathOneWarningFileUnchanged) {
  std::string base = MakeDir("hostile-file-on-way", false);
  std::string file = base + "/file";
  ASSERT_NO_FATAL_FAILURE(WriteNewFile(file, "keep\n"));
  Pair p = RunHazardWarned(1, file + "/job/host");
  EXPECT_NE(p.shim.err.find(file + " is not a directory"), std::string::npos) << p.shim.err;
  EXPECT_EQ(ReadFileOrEmpty(file), "keep\n");
  RemoveTree(base);
}

// Regression test for shim finding 2 (failed before 055f140: on ENOSPC the shim dropped
// lines silently, no warning).
TEST(HostileLog, FullDiskOneWarningProgramUnchangedNoTornLines) {
  ASSERT_EQ(geteuid(), 0u) << "FULL-DISK CASE NOT RUN: mounting a tmpfs needs root";
  std::string dir = MakeDir("hostile-full", false);
  ASSERT_EQ(mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=32k,mode=0700"), 0)
      << "FULL-DISK CASE NOT RUN: mount tmpfs failed: " << strerror(errno);
  // No free page left: a forkguard.event/2 log of this program (header, module and stack
  // records, short events) fits in less than the one page /1 needed, so the disk is full
  // from the first line: the first write fails, the rest are not tried.
  ASSERT_NO_FATAL_FAILURE(WriteNewFile(dir + "/filler", std::string(32 * 1024, 'x')));
  Pair p = RunHazard(dir);
  ExpectUnchanged(p);
  EXPECT_EQ(LogWarnings(p.shim) + CountLines(p.shim.err, "forkguard: event log"), 1)
      << "a full disk loses log lines: expected one warning saying so\n"
      << p.shim.err;
  LogDir d = ReadLogDir(dir, /*allow_truncated_last=*/true);
  EXPECT_TRUE(d.problems.empty()) << ::testing::PrintToString(d.problems);
  EXPECT_EQ(umount(dir.c_str()), 0);
  RemoveTree(dir);
}

// AT_SECURE: a setuid-root copy of secure_prog run by uid 65534. FORKGUARD_MODE=error,
// a valid FORKGUARD_LOG, FORKGUARD_QUIET=1 and a bad FORKGUARD_STACK_DEPTH must all be
// ignored: the hazardous fork (decided by the shim's atfork handler) is reported in
// warn mode, nothing is logged, no configuration warning. The same binary run by root
// (not secure) obeys them.
TEST(HostileEnv, AtSecureIgnoresTheEnvironment) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to install a setuid-root test program";
  std::string base = MakeDir("secure", /*world_readable=*/true);
  std::string prog = CopyInto(Program("tests/safety/secure_prog"), base);
  ASSERT_EQ(chown(prog.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(prog.c_str(), 04755), 0);
  std::string log = base + "/log";
  ASSERT_EQ(mkdir(log.c_str(), 0700), 0);  // owned by root = the secure program's euid
  std::vector<std::string> env = {"FORKGUARD_MODE=error", "FORKGUARD_LOG=" + log,
                                  "FORKGUARD_QUIET=1", "FORKGUARD_STACK_DEPTH=lots"};
  std::vector<std::string> argv = {prog, Shim(), StubLibDir() + "/libibverbs.so.1"};

  RunOptions secure = SafetyRunOptions();
  secure.env = env;
  secure.run_as = true;
  secure.uid = kNobody;
  secure.gid = kNobody;
  ProgramResult s = RunProgram(argv, secure);
  ASSERT_TRUE(s.Exited(0)) << s.Describe();
  EXPECT_NE(s.out.find("secure=1"), std::string::npos) << s.Describe();
  EXPECT_NE(s.out.find("context open"), std::string::npos) << s.Describe();
  EXPECT_NE(s.out.find("fork ok"), std::string::npos) << s.Describe();
  EXPECT_NE(s.err.find("mode: warn"), std::string::npos) << "FORKGUARD_MODE=error obeyed?\n"
                                                         << s.Describe();
  EXPECT_NE(s.err.find("forkguard: fork after RDMA init"), std::string::npos)
      << "FORKGUARD_QUIET obeyed (or the shim saw nothing)\n"
      << s.Describe();
  EXPECT_EQ(s.err.find("ignoring FORKGUARD_"), std::string::npos) << s.Describe();
  EXPECT_TRUE(Empty(log)) << "FORKGUARD_LOG obeyed under AT_SECURE";

  // Control: not secure, the same variables are obeyed.
  RunOptions plain = SafetyRunOptions();
  plain.env = env;
  ProgramResult c = RunProgram(argv, plain);
  ASSERT_TRUE(c.Exited(0)) << c.Describe();
  EXPECT_NE(c.out.find("secure=0"), std::string::npos) << c.Describe();
  EXPECT_NE(c.out.find("fork ok"), std::string::npos) << c.Describe();
  EXPECT_EQ(c.err.find("forkguard: fork after RDMA init"), std::string::npos)
      << "FORKGUARD_QUIET=1 not obeyed\n"
      << c.Describe();
  LogDir d = ReadLogDir(log);
  bool noted = false;
  for (const LogLine& l : d.Of("note")) {
    noted |= cli::GetString(l.json, "text").find("FORKGUARD_STACK_DEPTH=lots") != std::string::npos;
  }
  EXPECT_TRUE(noted) << "the bad FORKGUARD_STACK_DEPTH is logged as a note";
  std::vector<LogLine> starts = d.Of("process_start");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(cli::GetString(starts[0].json, "mode"), "error");
  EXPECT_EQ(d.Of("fork").size(), 1u);
  RemoveTree(base);
}

}  // namespace
}  // namespace forkguard::safety
