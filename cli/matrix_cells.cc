#include "cli/matrix_cells.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace forkguard::cli {
namespace {

// scripts/guests/matrix-fetch: rdma-core 33 is bullseye's, 44 this machine's (bookworm's), 56
// trixie's source built; every kernel runs all three.
constexpr int kAllRdmaCores[] = {44, 33, 56};

// The document's column order (scripts/lanes/matrix-lane's kernels): 6.1 is the guest's own
// (bookworm), 5.10 bullseye's and 6.12 trixie's linux-image-*-amd64-unsigned.
constexpr MatrixKernel kKernels[] = {
    {"6.1", "6.1.0-57-amd64", kAllRdmaCores},
    {"6.12", "6.12.117+deb13-amd64", kAllRdmaCores},
    {"5.10", "5.10.0-32-amd64", kAllRdmaCores},
};

}  // namespace

std::span<const MatrixKernel> MatrixKernels() { return kKernels; }

std::vector<int> MatrixRdmaCores() {
  std::set<int> all;
  for (const MatrixKernel& k : kKernels) all.insert(k.rdma_cores.begin(), k.rdma_cores.end());
  return {all.begin(), all.end()};
}

std::string KernelSeries(const std::string& release) {
  size_t i = 0;
  auto digits = [&] {
    size_t start = i;
    while (i < release.size() && isdigit(static_cast<unsigned char>(release[i]))) ++i;
    return i > start;
  };
  if (!digits() || i >= release.size() || release[i] != '.') return "";
  ++i;
  if (!digits()) return "";
  // "6.1" must not be read out of "6.12": the minor number ends at a non-digit.
  return release.substr(0, i);
}

const MatrixKernel* MatrixKernelFor(const std::string& release) {
  std::string series = KernelSeries(release);
  for (const MatrixKernel& k : kKernels)
    if (series == k.series) return &k;
  return nullptr;
}

bool MatrixHasRdmaCore(const MatrixKernel& k, int rdma_core) {
  return std::find(k.rdma_cores.begin(), k.rdma_cores.end(), rdma_core) != k.rdma_cores.end();
}

std::vector<int> NearestMatrixRdmaCores(int rdma_core) {
  std::vector<int> all = MatrixRdmaCores();
  std::vector<int> out;
  auto above = std::upper_bound(all.begin(), all.end(), rdma_core);
  if (above != all.begin()) out.push_back(*std::prev(above));
  if (above != all.end()) out.push_back(*above);
  return out;
}

std::string MatrixColumn(const MatrixKernel& k, int rdma_core) {
  return std::string(k.release) + " rdma-core " + std::to_string(rdma_core);
}

const char* MatrixRowKind(facts::MemoryKind k) {
  switch (k) {
    case facts::MemoryKind::kAnonymous:
      return "anonymous, small pages (64 KiB)";
    case facts::MemoryKind::kThp:
      return "anonymous THP (2 MiB, MADV_HUGEPAGE)";
    case facts::MemoryKind::kHugetlb:
      return "hugetlb (2 MiB, MAP_HUGETLB)";
    case facts::MemoryKind::kShared:
      return "MAP_SHARED anonymous (64 KiB)";
    case facts::MemoryKind::kPrivateFile:
      return "MAP_PRIVATE file, read-only MR (64 KiB)";
    case facts::MemoryKind::kUnknown:
      break;
  }
  return nullptr;
}

}  // namespace forkguard::cli
