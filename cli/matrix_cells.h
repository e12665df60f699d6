// What the fork matrix (docs/fork-matrix.md, written by scripts/lanes/matrix-lane) measured: its
// kernels and rdma-cores, and the labels of its rows. Compiled in, so that `forkguard doctor`
// names a column only where one exists; //cli:matrix_cells_test checks this table against
// the document's columns and rows, so the two cannot drift apart.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "facts/fork_rule.h"

namespace forkguard::cli {

// One kernel the matrix booted: its series ("6.1") and the exact Debian release it ran
// (`uname -r` in the guest), with the rdma-cores laid over it.
struct MatrixKernel {
  const char* series;
  const char* release;
  std::span<const int> rdma_cores;
};

// The kernels, in the order of the document's columns.
std::span<const MatrixKernel> MatrixKernels();

// Every rdma-core the matrix ran (on any kernel), ascending.
std::vector<int> MatrixRdmaCores();

// "6.18" of "6.18.44-fc-v1272", "5.10" of "5.10.0-32-amd64"; "" when the release does not
// start with MAJOR.MINOR.
std::string KernelSeries(const std::string& release);

// The matrix's kernel of this release's series, or nullptr.
const MatrixKernel* MatrixKernelFor(const std::string& release);

// Whether kernel `k` ran with rdma-core `rdma_core`.
bool MatrixHasRdmaCore(const MatrixKernel& k, int rdma_core);

// The measured rdma-cores nearest to `rdma_core`: the closest below and the closest above
// (one of them at the ends).
std::vector<int> NearestMatrixRdmaCores(int rdma_core);

// The column's header in the document: "6.1.0-57-amd64 rdma-core 44".
std::string MatrixColumn(const MatrixKernel& k, int rdma_core);

// The label of the memory column of kind `k`'s row ("hugetlb (2 MiB, MAP_HUGETLB)"), or
// nullptr for a kind the matrix has no row of.
const char* MatrixRowKind(facts::MemoryKind k);

// The fork support column's labels of the matrix's rows.
inline constexpr char kMatrixForkSupportOff[] = "off";
inline constexpr char kMatrixForkSupportEnv[] = "RDMAV_FORK_SAFE=1";
inline constexpr char kMatrixForkSupportInit[] = "ibv_fork_init()";
// The hugetlb rows' with RDMAV_HUGEPAGES_SAFE=1 too.
inline constexpr char kMatrixForkSupportEnvHugepages[] = "RDMAV_FORK_SAFE=1 RDMAV_HUGEPAGES_SAFE=1";
inline constexpr char kMatrixForkSupportInitHugepages[] = "ibv_fork_init() RDMAV_HUGEPAGES_SAFE=1";

}  // namespace forkguard::cli
