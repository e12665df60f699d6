#include "cli/doctor_checks.h"

#include <stdio.h>

#include <algorithm>
#include <utility>

#include "cli/matrix_cells.h"

namespace forkguard::cli::doctor {
namespace {

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

}  // namespace forkguard::cli::doctor
