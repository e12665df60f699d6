#include "cli/doctor_checks.h"

#include <stdio.h>

#include <algorithm>
#include <utility>

#include "cli/matrix_cells.h"

namespace forkguard::cli::doctor {
namespace {

// The kinds fix mode is spoken of for (a private file mapping answers as anonymous memory,
// MAP_SHARED memory is never copied nor left stale).
constexpr facts::MemoryKind kFixKinds[] = {facts::MemoryKind::kAnonymous, facts::MemoryKind::kThp,
                                           facts::MemoryKind::kHugetlb};

std::string JoinList(const std::vector<std::string>& items, const char* last,
                     const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) s += i + 1 == items.size() ? last : sep;
    s += items[i];
  }
  return s;
}

// "5.10, 6.1, 6.12": the matrix's kernel series, oldest first.
std::string MeasuredSeries() {
  std::vector<std::pair<std::pair<int, int>, std::string>> v;
  for (const MatrixKernel& k : MatrixKernels()) {
    int major = 0, minor = 0;
    sscanf(k.series, "%d.%d", &major, &minor);
    v.push_back({{major, minor}, k.series});
  }
  std::sort(v.begin(), v.end());
  std::vector<std::string> names;
  for (const auto& e : v) names.push_back(e.second);
  return JoinList(names, ", ");
}

std::string MeasuredRdmaCores() {
  std::vector<std::string> names;
  for (int rc : MatrixRdmaCores()) names.push_back(std::to_string(rc));
  return JoinList(names, ", ");
}

// This machine's place in the fork matrix: its column, or why it has none.
struct Place {
  const MatrixKernel* kernel = nullptr;  // the matrix's kernel of this series
  std::string column;                    // "" when there is none
  std::string why;                       // why not
  std::string missing;                   // that, and where the verdicts come from then
};

Place PlaceOf(const DoctorFacts& f) {
  Place p;
  p.kernel = MatrixKernelFor(f.release);
  int rc = f.m.rdma_core;
  std::vector<int> all = MatrixRdmaCores();
  bool rc_measured = rc >= 0 && std::find(all.begin(), all.end(), rc) != all.end();
  if (p.kernel != nullptr && rc >= 0 && MatrixHasRdmaCore(*p.kernel, rc)) {
    p.column = MatrixColumn(*p.kernel, rc);
    return p;
  }
  std::vector<std::string> why;
  if (p.kernel == nullptr) {
    std::string series = KernelSeries(f.release);
    why.push_back("this kernel (" + f.release + (series.empty() ? "" : ", series " + series) +
                  ") is not in the fork matrix (measured: " + MeasuredSeries() + ")");
  }
  if (rc < 0) {
    why.push_back("the rdma-core version is unknown, so no column of it applies (measured: " +
                  MeasuredRdmaCores() + ")");
  } else if (!rc_measured) {
    std::vector<std::string> near;
    for (int n : NearestMatrixRdmaCores(rc)) near.push_back(std::to_string(n));
    why.push_back("rdma-core " + std::to_string(rc) + " is not in the fork matrix (measured: " +
                  MeasuredRdmaCores() + "; nearest: " + JoinList(near, " and ") +
                  ", not claimed for " + std::to_string(rc) + ")");
  } else if (p.kernel != nullptr) {
    why.push_back("rdma-core " + std::to_string(rc) + " did not run on the matrix's " +
                  p.kernel->series + " kernel");
  }
  bool by_version = rc >= 0 && p.kernel != nullptr;
  p.why = JoinList(why, "; and ");
  p.missing = "docs/fork-matrix.md has no column for this machine: " + p.why +
              "; the verdicts here come from " +
              (by_version ? "rdma-core's version, this boot's probe and what the kernel reports"
                          : "this boot's probe and what the kernel reports") +
              ", not from a measured cell";
  return p;
}

// The fork support column's label of the matrix's row for kind `k` with fork support as
// this environment sets it.
const char* EnvRow(const DoctorFacts& f, facts::MemoryKind k) {
  return k == facts::MemoryKind::kHugetlb && f.m.hugepages_safe ? kMatrixForkSupportEnvHugepages
                                                                : kMatrixForkSupportEnv;
}

std::string Quoted(const std::vector<const char*>& labels) {
  std::vector<std::string> q;
  for (const char* l : labels) q.push_back(std::string("\"") + l + "\"");
  return JoinList(q, " and ");
}

// What the kernel does with a kind's pinned pages at fork, without MADV_DONTFORK, and from
// what (kind-neutral, so that kinds alike share one sentence).
std::string KernelDoes(const facts::RangeVerdict& bare) {
  switch (bare.basis) {
    case facts::Basis::kProbeIntact:
      return "the kernel copies this memory for the child at fork (this boot's probe)";
    case facts::Basis::kReportedCof:
      return "the kernel copies this memory for the child at fork (it reports copy-on-fork)";
    case facts::Basis::kProbeStale:
      return "the kernel does not copy this memory at fork (this boot's probe)";
    case facts::Basis::kReportedNoCof:
      return "the kernel does not copy this memory at fork (it reports no copy-on-fork)";
    default:
      return "what the kernel does with it at fork is unknown: " + BasisOf(bare);
  }
}

// What fix mode does with one memory kind here.
struct KindFix {
  std::string text;
  bool harm = false;               // a known harm today (without fix) that fix removes
  bool copies = false;             // fix keeps the child alive (the kernel copies the kind)
  bool withholds_unknown = false;  // fix withholds it because nothing can tell
  std::vector<const char*> rows;   // the matrix rows' fork support labels that show it
};

KindFix FixFor(const DoctorFacts& f, facts::MemoryKind k) {
  const facts::MachineFacts& m = f.m;
  facts::MachineFacts off = m;
  off.fork_support = facts::ForkSupportBy::kOff;
  facts::MachineFacts on = m;
  on.fork_support = facts::ForkSupportBy::kForkInit;
  // What the kernel itself does with the kind at fork (no MADV_DONTFORK), and why.
  facts::RangeVerdict bare = facts::DecideRange(off, {k, facts::Tri::kNo});
  std::string kernel = KernelDoes(bare);
  facts::Tri marks = facts::RegistrationMarksDontfork(m);
  facts::Tri marks_if_on = facts::RegistrationMarksDontfork(on);
  bool env_on = m.fork_support != facts::ForkSupportBy::kOff;
  std::string by =
      f.fork_env.empty() ? std::string("fork support") : "fork support (" + f.fork_env + ")";
  KindFix x;
  x.rows.push_back(kMatrixForkSupportOff);
  if (env_on)
    x.rows.push_back(EnvRow(f, k));
  else if (marks_if_on != facts::Tri::kNo)
    x.rows.push_back(kMatrixForkSupportInit);
  const std::string keep_alive =
      "fix keeps the child alive where fork support marked the range MADV_DONTFORK (the child "
      "gets a copy)";
  const std::string already =
      by +
      " already makes its registrations MADV_DONTFORK, which keeps the parent's data intact: fix "
      "leaves them so (the child must not touch them)";

  switch (bare.effect) {
    case facts::ForkEffect::kNothing:
      x.copies = true;
      if (marks == facts::Tri::kYes) {
        x.harm = true;
        x.text = kernel + ", but " + by +
                 " marks its registrations MADV_DONTFORK, so a child that touches them dies: " +
                 keep_alive;
      } else if (marks == facts::Tri::kUnknown) {
        x.text = kernel + "; whether " + by +
                 " marks its registrations MADV_DONTFORK is unknown (rdma-core version "
                 "unknown): where it does, " +
                 keep_alive;
      } else if (env_on || marks_if_on == facts::Tri::kNo) {
        x.text = "nothing to fix: " + kernel +
                 " and this rdma-core does not mark it MADV_DONTFORK" +
                 (env_on ? "" : " even with fork support on");
      } else {
        x.text = "nothing to fix while fork support is off (" + kernel +
                 "); if a library turns it on (ibv_fork_init(): UCX, NCCL), " + keep_alive;
      }
      break;
    case facts::ForkEffect::kParentCorruption:
      if (marks == facts::Tri::kYes) {
        x.text = kernel + "; " + already;
      } else {
        x.harm = marks == facts::Tri::kNo;
        x.text = kernel +
                 ", so a fork after registration leaves the parent's data STALE: fix withholds "
                 "the range from the child (MADV_DONTFORK for the fork): the parent's data stays "
                 "intact; the child must not touch it";
      }
      break;
    case facts::ForkEffect::kChildSegv:  // not without MADV_DONTFORK
    case facts::ForkEffect::kUnknown:
      if (marks == facts::Tri::kYes) {
        x.text = already + "; " + kernel;
      } else {
        x.withholds_unknown = true;
        x.text =
            "fix withholds the range (MADV_DONTFORK for the fork: the parent's data stays intact, "
            "the child must not touch it) because " +
            BasisOf(bare);
      }
      break;
  }
  return x;
}

}  // namespace

std::string KindList(const std::vector<facts::MemoryKind>& kinds) {
  std::vector<std::string> names;
  for (facts::MemoryKind k : kinds) names.push_back(facts::MemoryKindName(k));
  return JoinList(names, " and ");
}

std::string BasisOf(const facts::RangeVerdict& v) {
  char buf[512];
  return facts::BasisText(v, buf, sizeof(buf));
}

std::string MatrixCell(const DoctorFacts& f) {
  Place p = PlaceOf(f);
  if (p.column.empty()) return p.missing;
  std::string d = "Measured: docs/fork-matrix.md, column \"" + p.column + "\"";
  if (f.release != p.kernel->release)
    d += " (the matrix's " + std::string(p.kernel->series) + " kernel; this one is " + f.release +
         ")";
  if (f.m.fork_support == facts::ForkSupportBy::kOff)
    return d + ", rows with fork support \"" + kMatrixForkSupportOff + "\" (and \"" +
           kMatrixForkSupportInit + "\" where a library calls it)";
  d += ", rows with fork support \"" + std::string(kMatrixForkSupportEnv) + "\"";
  if (f.m.hugepages_safe)
    d += " (hugetlb: \"" + std::string(kMatrixForkSupportEnvHugepages) + "\")";
  return d;
}

Check CheckFixMode(const DoctorFacts& f) {
  std::vector<facts::MemoryKind> harm, copied, withheld;
  bool withholds = false;  // where nothing can tell, fix keeps the parent intact
  std::vector<std::pair<facts::MemoryKind, KindFix>> fixes;
  // Kinds with the same answer share one sentence: "anonymous and thp: ...".
  std::vector<std::pair<std::vector<facts::MemoryKind>, std::string>> said;
  for (facts::MemoryKind k : kFixKinds) {
    KindFix x = FixFor(f, k);
    if (x.harm) {
      harm.push_back(k);
      (x.copies ? copied : withheld).push_back(k);
    }
    auto same =
        std::find_if(said.begin(), said.end(), [&](const auto& s) { return s.second == x.text; });
    if (same != said.end())
      same->first.push_back(k);
    else
      said.push_back({{k}, x.text});
    withholds = withholds || x.withholds_unknown;
    fixes.push_back({k, std::move(x)});
  }
  std::string per_kind;
  for (const auto& [kinds, text] : said)
    per_kind += (per_kind.empty() ? "" : "; ") + KindList(kinds) + ": " + text;
  bool set = f.mode == "fix";
  std::string d = set             ? "FORKGUARD_MODE=fix is set. "
                  : !harm.empty() ? "would make a fork after registration safe here for " +
                                        KindList(harm) + " memory. "
                  : withholds ? "no known harm to undo here as things stand. "
                              : "nothing to fix here as things stand. ";
  d += per_kind + ". ";
  Place p = PlaceOf(f);
  if (!p.column.empty()) {
    std::vector<std::string> rows;
    for (const auto& [k, x] : fixes)
      rows.push_back(std::string("\"") + MatrixRowKind(k) + "\" with fork support " +
                     Quoted(x.rows));
    d += "Matrix cells: docs/fork-matrix.md, column \"" + p.column + "\", rows " +
         JoinList(rows, "; ", "; ");
  } else {
    d += "No fork matrix cell shows it: " + p.why;
  }
  if (set || harm.empty()) return {"fix mode", Verdict::kOk, d, ""};
  std::string what;
  if (!copied.empty())
    what += "a child that touches " + KindList(copied) + " registrations gets a copy and lives";
  if (!withheld.empty())
    what += std::string(what.empty() ? "" : "; ") + KindList(withheld) +
            " registrations are withheld from the child, so the parent's data stays intact (the "
            "child must not touch them)";
  return {"fix mode", Verdict::kWarn, d,
          "for a program that forks after RDMA init, FORKGUARD_MODE=fix: " + what +
              ". The child still must not use the inherited RDMA context, PDs and QPs"};
}

}  // namespace forkguard::cli::doctor
