// `forkguard doctor` on the host: every verdict is checked against what this
// machine really has (read independently here), so the test is right on a
// machine with or without a device; the CI host has none and doctor must say
// so with a warning. The same checks in the Soft-RoCE guest: doctor_rdma_test.
// The checks that are pure functions of the facts (cli/doctor_checks.h) are also run here
// with facts of the test's own: kernels and rdma-cores in and out of the fork matrix, and
// what fix mode does with each memory kind.
#include <dirent.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "cli/doctor_checks.h"
#include "cli/testdata/doctor_output.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using test_support::ProgramResult;
using test_support::RunProgram;
using testdata::DoctorBlock;
using testdata::DoctorLine;

bool HasDevices() {
  DIR* d = opendir("/sys/class/infiniband");
  if (!d) return false;
  bool any = false;
  while (dirent* e = readdir(d)) any = any || e->d_name[0] != '.';
  closedir(d);
  return any;
}

ProgramResult Doctor(std::vector<std::string> env = {}) {
  std::string shim = forkguard::test_support::Runfile("shim/libforkguard.so");
  env.push_back("FORKGUARD_SHIM_DIR=" + shim.substr(0, shim.rfind('/')));
  // This boot's pin probe is cached here, not in the user's cache directory.
  env.push_back("FORKGUARD_CACHE_DIR=" + std::string(getenv("TEST_TMPDIR")) + "/fgcache");
  return RunProgram({forkguard::test_support::Runfile("cli/forkguard"), "doctor"}, env);
}

TEST(Doctor, VerdictsMatchThisMachine) {
  ProgramResult r = Doctor({"RDMAV_FORK_SAFE=", "IBV_FORK_SAFE=", "RDMAV_HUGEPAGES_SAFE=",
                            "FORKGUARD_MODE=", "LD_PRELOAD="});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  if (HasDevices()) {
    EXPECT_EQ(DoctorLine(r.out, "RDMA devices").rfind("ok    RDMA devices", 0), 0u) << r.out;
  } else {
    EXPECT_EQ(DoctorLine(r.out, "RDMA devices"),
              "warn  RDMA devices      none (no /sys/class/infiniband entries)")
        << r.out;
    EXPECT_NE(r.out.find("-> no RDMA device: nothing to guard here"), std::string::npos);
  }
  rlimit rl{};
  getrlimit(RLIMIT_MEMLOCK, &rl);
  if (rl.rlim_cur == RLIM_INFINITY) {
    EXPECT_EQ(DoctorLine(r.out, "memlock limit"), "ok    memlock limit     unlimited") << r.out;
  } else if (rl.rlim_cur < (rlim_t{64} << 20)) {
    EXPECT_EQ(
        DoctorLine(r.out, "memlock limit")
            .rfind("warn  memlock limit     " + std::to_string(rl.rlim_cur / 1024) + " KiB", 0),
        0u)
        << r.out;
  }
  // Without ib_core the kernel reports nothing, and no release number stands in for it; the
  // probe measures. This host's 6.x kernel copies pinned anonymous pages at fork.
  if (!HasDevices()) {
    EXPECT_NE(DoctorBlock(r.out, "copy-on-fork").find("does not report it"), std::string::npos)
        << r.out;
  }
  EXPECT_EQ(DoctorLine(r.out, "copy-on-fork").rfind("ok  ", 0), 0u) << r.out;
  EXPECT_EQ(
      DoctorLine(r.out, "pinned pages")
          .rfind("ok    pinned pages      anonymous intact (copied for the child at fork)", 0),
      0u)
      << r.out;
  EXPECT_EQ(DoctorLine(r.out, "rdma-core").rfind("ok    rdma-core         rdma-core ", 0), 0u)
      << r.out;
  EXPECT_EQ(DoctorLine(r.out, "fork env").rfind("ok  ", 0), 0u) << r.out;
  EXPECT_EQ(DoctorLine(r.out, "shim").rfind("ok    shim              /", 0), 0u) << r.out;
  EXPECT_NE(DoctorBlock(r.out, "shim").find("libforkguard.so loads"), std::string::npos) << r.out;
  EXPECT_EQ(DoctorLine(r.out, "audit module").rfind("ok  ", 0), 0u) << r.out;
  // The fork matrix ran 5.10, 6.1 and 6.12 (docs/fork-matrix.md): another kernel has no
  // column there, and doctor says so rather than name one (whether this rdma-core is in it
  // is the injected-facts tests' to check).
  utsname u{};
  uname(&u);
  std::string release = u.release;
  bool measured = false;
  for (const char* s : {"5.10.", "6.1.", "6.12."}) measured = measured || release.rfind(s, 0) == 0;
  std::string fs = DoctorBlock(r.out, "fork support");
  if (measured) {
    EXPECT_EQ(fs.find("this kernel ("), std::string::npos) << r.out;
  } else {
    EXPECT_NE(fs.find("this kernel (" + release), std::string::npos) << r.out;
    EXPECT_NE(fs.find("is not in the fork matrix (measured: 5.10, 6.1, 6.12)"), std::string::npos)
        << r.out;
    EXPECT_EQ(fs.find("column \""), std::string::npos) << r.out;
  }
  EXPECT_FALSE(DoctorLine(r.out, "fix mode").empty()) << r.out;
  EXPECT_NE(r.out.find("summary: "), std::string::npos);
}

TEST(Doctor, ForkSafeEnvAndBadModeWarn) {
  ProgramResult r = Doctor({"RDMAV_FORK_SAFE=1", "FORKGUARD_MODE=loud"});
  EXPECT_EQ(r.status, 0) << r.out;
  // The variables as set; what they do is fork support's to say (one place, no contradiction).
  EXPECT_EQ(DoctorLine(r.out, "fork env"),
            "ok    fork env          RDMAV_FORK_SAFE=1 (what this does here: see fork support)")
      << r.out;
  EXPECT_NE(DoctorBlock(r.out, "fork support").find("MADV_DONTFORK"), std::string::npos);
  EXPECT_EQ(DoctorLine(r.out, "FORKGUARD_MODE").rfind("warn", 0), 0u) << r.out;
}

TEST(Doctor, MissingShimFails) {
  ProgramResult r = RunProgram({forkguard::test_support::Runfile("cli/forkguard"), "doctor"},
                               {"FORKGUARD_SHIM_DIR=/nonexistent"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(DoctorLine(r.out, "shim"), "FAIL  shim              libforkguard.so not found")
      << r.out;
  EXPECT_NE(r.out.find("1 fail"), std::string::npos);
}

TEST(Doctor, ActiveWhenPreloaded) {
  std::string shim = forkguard::test_support::Runfile("shim/libforkguard.so");
  ProgramResult r = Doctor({"LD_PRELOAD=" + shim});
  EXPECT_NE(DoctorBlock(r.out, "active").find("libforkguard.so is in LD_PRELOAD here"),
            std::string::npos)
      << r.out;
}

// The rdma-core x kernel x who case, with fork support from the environment.
TEST(Doctor, ForkSupportSaysWhichCaseThisMachineIsIn) {
  ProgramResult r =
      Doctor({"RDMAV_FORK_SAFE=1", "IBV_FORK_SAFE=", "LD_PRELOAD=", "FORKGUARD_MODE="});
  std::string block = DoctorBlock(r.out, "fork support");
  ASSERT_FALSE(block.empty()) << r.out;
  EXPECT_NE(block.find("on, turned on by the environment (RDMAV_FORK_SAFE=1)"), std::string::npos)
      << r.out;
  // This machine's rdma-core, read independently.
  char* real = realpath("/usr/lib/x86_64-linux-gnu/libibverbs.so.1", nullptr);
  int a = 0, b = 0, v = -1;
  if (real != nullptr) {
    sscanf(strrchr(real, '/') + 1, "libibverbs.so.%d.%d.%d", &a, &b, &v);
    free(real);
  }
  if (v >= 0) {
    EXPECT_NE(block.find("rdma-core " + std::to_string(v)), std::string::npos) << r.out;
  }
  // The host has no ib_core: the kernel reports nothing, so every rdma-core marks every
  // registration; this kernel copies pinned anonymous pages at fork (measured), so for that
  // memory fork support only kills children: doctor advises unsetting it, never setting it.
  if (!HasDevices()) {
    EXPECT_EQ(block.rfind("warn", 0), 0u) << r.out;
    EXPECT_NE(block.find("so rdma-core marks every registration MADV_DONTFORK"), std::string::npos)
        << r.out;
    EXPECT_NE(block.find("leaves anonymous"), std::string::npos) << r.out;
    EXPECT_THAT(r.out, HasSubstr("-> unset RDMAV_FORK_SAFE"));
  }
  EXPECT_THAT(r.out, Not(HasSubstr("RDMAV_FORK_SAFE=1 (with")));
  ProgramResult off =
      Doctor({"RDMAV_FORK_SAFE=", "IBV_FORK_SAFE=", "UCX_IB_FORK_INIT=", "LD_PRELOAD="});
  std::string b2 = DoctorBlock(off.out, "fork support");
  EXPECT_NE(b2.find("not turned on by the environment"), std::string::npos) << off.out;
  EXPECT_NE(b2.find("UCX_IB_FORK_INIT unset"), std::string::npos) << off.out;
}

// What doctor quotes (the environment, sysfs, paths) is escaped: a value cannot move the
// terminal's cursor or start a line of its own.
TEST(Doctor, QuotedValuesAreEscaped) {
  ProgramResult r = Doctor({"FORKGUARD_MODE=x\x1b[2J\n::error::forged\tz"});
  EXPECT_EQ(DoctorLine(r.out, "FORKGUARD_MODE"),
            "warn  FORKGUARD_MODE    \"x\\x1b[2J\\x0a::error::forged\\x09z\" is not a mode")
      << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b")));
  EXPECT_THAT(r.out, Not(HasSubstr("\n::")));
}

// The Debian package's layout (scripts/package): /usr/bin/forkguard finds the shim in
// /usr/lib/x86_64-linux-gnu/forkguard without FORKGUARD_SHIM_DIR or runfiles.
TEST(Doctor, FindsTheShimInTheDebianPackageLayout) {
  namespace fs = std::filesystem;
  fs::path root = forkguard::test_support::MakeTempDir("deb-layout");
  fs::path lib = root / "usr/lib/x86_64-linux-gnu/forkguard";
  fs::create_directories(root / "usr/bin");
  fs::create_directories(lib);
  fs::copy_file(forkguard::test_support::Runfile("cli/forkguard"), root / "usr/bin/forkguard");
  fs::copy_file(forkguard::test_support::Runfile("shim/libforkguard.so"), lib / "libforkguard.so");
  fs::copy_file(forkguard::test_support::Runfile("shim/libforkguard_audit.so"),
                lib / "libforkguard_audit.so");
  ProgramResult r =
      RunProgram({(root / "usr/bin/forkguard").string(), "doctor"},
                 {"FORKGUARD_SHIM_DIR=", "RUNFILES_DIR=", "TEST_SRCDIR=", "LD_PRELOAD="});
  EXPECT_EQ(DoctorLine(r.out, "shim").rfind("ok    shim              " + lib.string(), 0), 0u)
      << r.out;
  EXPECT_NE(DoctorBlock(r.out, "audit module").find(lib.string() + "/libforkguard_audit.so"),
            std::string::npos)
      << r.out;
  fs::remove_all(root);
}

// --- the pure checks, with the test's facts ----------------------------------------------

using doctor::Check;
using doctor::DoctorFacts;
using doctor::Verdict;
using facts::MemoryKind;
using facts::PinFate;
using facts::Tri;

// A machine: its kernel, rdma-core, what the kernel reports, what this boot's probe measured
// (anonymous, THP, hugetlb), and RDMAV_FORK_SAFE=1 or nothing.
DoctorFacts Machine(const std::string& release, int rdma_core, Tri reported_cof, PinFate anon,
                    PinFate thp, PinFate hugetlb, bool fork_safe_env = false) {
  DoctorFacts f;
  f.release = release;
  f.m.rdma_core = rdma_core;
  f.m.reported_cof = reported_cof;
  const std::pair<MemoryKind, PinFate> fates[] = {
      {MemoryKind::kAnonymous, anon}, {MemoryKind::kThp, thp}, {MemoryKind::kHugetlb, hugetlb}};
  for (auto [k, fate] : fates) {
    int i = static_cast<int>(k);
    f.m.probe.fate[i] = fate;
    f.m.probe.why[i] =
        fate == PinFate::kUnknown ? facts::ProbeWhy::kNoHugetlbPages : facts::ProbeWhy::kNone;
  }
  if (fork_safe_env) {
    f.fork_env = "RDMAV_FORK_SAFE=1";
    f.m.fork_support = facts::ForkSupportBy::kEnvironment;
  }
  return f;
}

// Linux 5.10 as the matrix measured it: pinned anonymous and THP pages copied at fork,
// hugetlb ones not; no copy-on-fork reported.
DoctorFacts Debian11(int rdma_core, bool fork_safe_env = false) {
  return Machine("5.10.0-32-amd64", rdma_core, Tri::kUnknown, PinFate::kIntact, PinFate::kIntact,
                 PinFate::kStale, fork_safe_env);
}

TEST(DoctorMatrix, KernelAndRdmaCoreInTheMatrixNameTheColumn) {
  DoctorFacts f = Machine("6.1.0-57-amd64", 44, Tri::kYes, PinFate::kIntact, PinFate::kIntact,
                          PinFate::kIntact);
  EXPECT_EQ(doctor::MatrixCell(f),
            "Measured: docs/fork-matrix.md, column \"6.1.0-57-amd64 rdma-core 44\", rows with "
            "fork support \"off\" (and \"ibv_fork_init()\" where a library calls it)");
  // Another Debian build of the same series: the series' column, saying which kernel ran.
  f.release = "6.1.0-30-amd64";
  f.m.fork_support = facts::ForkSupportBy::kEnvironment;
  f.fork_env = "RDMAV_FORK_SAFE=1";
  EXPECT_EQ(doctor::MatrixCell(f),
            "Measured: docs/fork-matrix.md, column \"6.1.0-57-amd64 rdma-core 44\" (the matrix's "
            "6.1 kernel; this one is 6.1.0-30-amd64), rows with fork support "
            "\"RDMAV_FORK_SAFE=1\"");
  // 6.12 is its own column, not 6.1's.
  f.release = "6.12.117+deb13-amd64";
  EXPECT_NE(doctor::MatrixCell(f).find("column \"6.12.117+deb13-amd64 rdma-core 44\","),
            std::string::npos);
}

TEST(DoctorMatrix, KernelNotInTheMatrixIsSaid) {
  DoctorFacts f = Machine("6.18.44-fc-v1272", 44, Tri::kUnknown, PinFate::kIntact, PinFate::kIntact,
                          PinFate::kIntact);
  EXPECT_EQ(doctor::MatrixCell(f),
            "docs/fork-matrix.md has no column for this machine: this kernel (6.18.44-fc-v1272, "
            "series 6.18) is not in the fork matrix (measured: 5.10, 6.1, 6.12); the verdicts "
            "here come from this boot's probe and what the kernel reports, not from a measured "
            "cell");
  Check c = doctor::CheckFixMode(f);
  EXPECT_THAT(c.detail,
              HasSubstr("No fork matrix cell shows it: this kernel (6.18.44-fc-v1272, series "
                        "6.18) is not in the fork matrix (measured: 5.10, 6.1, 6.12)"));
  EXPECT_THAT(c.detail, Not(HasSubstr("Matrix cells")));
  EXPECT_THAT(c.detail, Not(HasSubstr("column")));
  // A release without a MAJOR.MINOR series.
  f.release = "custom";
  EXPECT_EQ(doctor::MatrixCell(f).rfind("docs/fork-matrix.md has no column for this machine: "
                                        "this kernel (custom) is not in the fork matrix",
                                        0),
            0u)
      << doctor::MatrixCell(f);
}

TEST(DoctorMatrix, RdmaCoreNotInTheMatrixIsSaidWithTheNearest) {
  DoctorFacts f = Debian11(50);
  EXPECT_EQ(doctor::MatrixCell(f),
            "docs/fork-matrix.md has no column for this machine: rdma-core 50 is not in the fork "
            "matrix (measured: 33, 44, 56; nearest: 44 and 56, not claimed for 50); the verdicts "
            "here come from rdma-core's version, this boot's probe and what the "
            "kernel reports, not from a measured cell");
  Check c = doctor::CheckFixMode(f);
  EXPECT_THAT(c.detail,
              HasSubstr("No fork matrix cell shows it: rdma-core 50 is not in the fork matrix"));
  EXPECT_THAT(c.detail, Not(HasSubstr("column")));
  // Past the newest: one nearest.
  f.m.rdma_core = 60;
  EXPECT_NE(doctor::MatrixCell(f).find("(measured: 33, 44, 56; nearest: 56, not claimed for 60)"),
            std::string::npos)
      << doctor::MatrixCell(f);
  // Both out of the matrix: both said.
  f.release = "6.18.44-fc-v1272";
  EXPECT_NE(doctor::MatrixCell(f).find("series 6.18) is not in the fork matrix (measured: 5.10, "
                                       "6.1, 6.12); and rdma-core 60 is not in the fork matrix"),
            std::string::npos)
      << doctor::MatrixCell(f);
  // A version doctor could not read: no column, and no guess.
  f = Debian11(-1);
  EXPECT_EQ(doctor::MatrixCell(f),
            "docs/fork-matrix.md has no column for this machine: the rdma-core version is "
            "unknown, so no column of it applies (measured: 33, 44, 56); the verdicts here come "
            "from this boot's probe and what the kernel reports, not from a measured cell");
}

// 5.10 without fork support (the matrix's stale cells): fix withholds hugetlb ranges; the
// kernel copies anonymous and THP pages, and nothing marks them, so fix has nothing to undo.
TEST(DoctorFixMode, KindTheKernelDoesNotCopyIsWithheld) {
  Check c = doctor::CheckFixMode(Debian11(44));
  EXPECT_EQ(c.name, "fix mode");
  EXPECT_EQ(c.verdict, Verdict::kWarn) << c.detail;
  EXPECT_EQ(
      c.detail.rfind("would make a fork after registration safe here for hugetlb memory. ", 0), 0u)
      << c.detail;
  EXPECT_THAT(
      c.detail,
      HasSubstr("hugetlb: the kernel does not copy this memory at fork (this boot's probe), so a "
                "fork after registration leaves the parent's data STALE: fix withholds the range "
                "from the child (MADV_DONTFORK for the fork): the parent's data stays intact; "
                "the child must not touch it"));
  EXPECT_THAT(c.detail,
              HasSubstr("anonymous and thp: nothing to fix while fork support is off (the "
                        "kernel copies this memory for the child at fork (this boot's "
                        "probe)); if a library turns it on (ibv_fork_init(): UCX, NCCL), fix "
                        "keeps the child alive where fork support marked the range "
                        "MADV_DONTFORK (the child gets a copy)"));
  // The cells that show it: this kernel's column, the kinds' rows without fork support and
  // with what a library turns on.
  EXPECT_THAT(c.detail,
              HasSubstr("Matrix cells: docs/fork-matrix.md, column \"5.10.0-32-amd64 "
                        "rdma-core 44\", rows \"anonymous, small pages (64 KiB)\" with fork "
                        "support \"off\" and \"ibv_fork_init()\"; \"anonymous THP (2 MiB, "
                        "MADV_HUGEPAGE)\" with fork support \"off\" and \"ibv_fork_init()\"; "
                        "\"hugetlb (2 MiB, MAP_HUGETLB)\" with fork support \"off\" and "
                        "\"ibv_fork_init()\""));
  EXPECT_EQ(c.advice,
            "for a program that forks after RDMA init, FORKGUARD_MODE=fix: hugetlb registrations "
            "are withheld from the child, so the parent's data stays intact (the child must not "
            "touch them). The child still must not use the inherited RDMA context, PDs and QPs");
}

// 5.10 with RDMAV_FORK_SAFE=1 (rdma-core 56 marks every registration: the kernel does not
// report copy-on-fork): fix gives the child a copy of anonymous and THP ranges; hugetlb ones
// stay MADV_DONTFORK, which is what keeps the parent intact there.
TEST(DoctorFixMode, KindTheKernelCopiesIsCopiedForTheChild) {
  Check c = doctor::CheckFixMode(Debian11(56, /*fork_safe_env=*/true));
  EXPECT_EQ(c.verdict, Verdict::kWarn) << c.detail;
  EXPECT_EQ(c.detail.rfind("would make a fork after registration safe here for anonymous and "
                           "thp memory. ",
                           0),
            0u)
      << c.detail;
  EXPECT_THAT(c.detail,
              HasSubstr("anonymous and thp: the kernel copies this memory for the child at "
                        "fork (this boot's probe), but fork support (RDMAV_FORK_SAFE=1) marks "
                        "its registrations MADV_DONTFORK, so a child that touches them dies: "
                        "fix keeps the child alive where fork support marked the range "
                        "MADV_DONTFORK (the child gets a copy)"));
  EXPECT_THAT(c.detail,
              HasSubstr("hugetlb: the kernel does not copy this memory at fork (this boot's "
                        "probe); fork support (RDMAV_FORK_SAFE=1) already makes its "
                        "registrations MADV_DONTFORK, which keeps the parent's data intact: "
                        "fix leaves them so (the child must not touch them)"));
  EXPECT_THAT(c.detail,
              HasSubstr("column \"5.10.0-32-amd64 rdma-core 56\", rows \"anonymous, small "
                        "pages (64 KiB)\" with fork support \"off\" and "
                        "\"RDMAV_FORK_SAFE=1\""));
  EXPECT_EQ(c.advice,
            "for a program that forks after RDMA init, FORKGUARD_MODE=fix: a child that touches "
            "anonymous and thp registrations gets a copy and lives. The child still must not use "
            "the inherited RDMA context, PDs and QPs");
  // With RDMAV_HUGEPAGES_SAFE=1 the hugetlb cells are the rows that say so.
  DoctorFacts hp = Debian11(56, true);
  hp.m.hugepages_safe = true;
  EXPECT_NE(doctor::CheckFixMode(hp).detail.find(
                "\"hugetlb (2 MiB, MAP_HUGETLB)\" with fork support \"off\" and "
                "\"RDMAV_FORK_SAFE=1 RDMAV_HUGEPAGES_SAFE=1\""),
            std::string::npos);
}

// Nothing can tell what the kernel does with hugetlb pages (no copy-on-fork reported, no
// hugetlb pages to probe with): fix keeps the parent intact, and says why.
TEST(DoctorFixMode, UnknownKindIsWithheldSayingWhy) {
  Check c = doctor::CheckFixMode(Machine("6.1.0-57-amd64", 44, Tri::kUnknown, PinFate::kIntact,
                                         PinFate::kIntact, PinFate::kUnknown));
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.detail;
  EXPECT_TRUE(c.advice.empty());
  EXPECT_EQ(c.detail.rfind("no known harm to undo here as things stand. ", 0), 0u) << c.detail;
  EXPECT_THAT(c.detail,
              HasSubstr("hugetlb: fix withholds the range (MADV_DONTFORK for the fork: the "
                        "parent's data stays intact, the child must not touch it) because the "
                        "kernel does not report copy-on-fork (RDMA netlink) and for pinned "
                        "hugetlb pages the probe found fewer than two free hugetlb pages "
                        "(vm.nr_hugepages)"));
}

// A kernel that reports copy-on-fork with rdma-core >= 51: rdma-core marks nothing even with
// fork support on, the kernel copies every kind: fix has nothing to do.
TEST(DoctorFixMode, NothingToFixOnACopyOnForkKernelWithNewRdmaCore) {
  Check c = doctor::CheckFixMode(Machine("6.12.117+deb13-amd64", 56, Tri::kYes, PinFate::kIntact,
                                         PinFate::kIntact, PinFate::kIntact, true));
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.detail;
  EXPECT_EQ(c.detail.rfind("nothing to fix here as things stand. anonymous, thp and hugetlb: "
                           "nothing to fix: the kernel copies this memory for the child at fork "
                           "(this boot's probe) and this rdma-core does not mark it "
                           "MADV_DONTFORK. Matrix cells: docs/fork-matrix.md, column "
                           "\"6.12.117+deb13-amd64 rdma-core 56\"",
                           0),
            0u)
      << c.detail;
}

// FORKGUARD_MODE=fix already set: what it does here, no advice.
TEST(DoctorFixMode, SetSaysWhatItDoes) {
  DoctorFacts f = Debian11(44);
  f.mode = "fix";
  Check c = doctor::CheckFixMode(f);
  EXPECT_EQ(c.verdict, Verdict::kOk) << c.detail;
  EXPECT_TRUE(c.advice.empty());
  EXPECT_EQ(c.detail.rfind("FORKGUARD_MODE=fix is set. ", 0), 0u) << c.detail;
  EXPECT_NE(c.detail.find("hugetlb: the kernel does not copy this memory"), std::string::npos);
}

}  // namespace
}  // namespace forkguard::cli
