// The compiled table of what the fork matrix measured (cli/matrix_cells.h) against the
// document the matrix lane writes (docs/fork-matrix.md): the same columns (kernel release x
// rdma-core) and the row labels doctor quotes. A new matrix run with another kernel or
// rdma-core fails here until the table says the same.
#include "cli/matrix_cells.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

std::string ReadDoc() {
  std::ifstream f(forkguard::test_support::Runfile("docs/fork-matrix.md"));
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The cells of a Markdown table line "| a | b |", trimmed.
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] != '|') {
      cur += line[i];
      continue;
    }
    size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
    out.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
    cur.clear();
  }
  return out;
}

// The Overview table: its header and the (memory, fork support) labels of its rows.
struct Overview {
  std::vector<std::string> header;
  std::set<std::pair<std::string, std::string>> rows;
};

Overview ReadOverview(const std::string& doc) {
  Overview o;
  size_t at = doc.find("\n## Overview\n");
  if (at == std::string::npos) return o;
  std::istringstream in(doc.substr(at + 1));
  std::string line;
  std::getline(in, line);  // the heading
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) break;
    if (line.rfind("|", 0) != 0) {
      if (in_table) break;
      continue;
    }
    std::vector<std::string> c = Cells(line);
    if (!in_table) {
      o.header = c;
      in_table = true;
    } else if (line.rfind("|---", 0) != 0 && c.size() >= 2) {
      o.rows.insert({c[0], c[1]});
    }
  }
  return o;
}

TEST(MatrixCells, ColumnsAreTheDocumentsColumns) {
  std::string doc = ReadDoc();
  ASSERT_FALSE(doc.empty()) << "docs/fork-matrix.md not in the runfiles";
  Overview o = ReadOverview(doc);
  ASSERT_GE(o.header.size(), 3u) << "no Overview table in docs/fork-matrix.md";
  EXPECT_EQ(o.header[0], "memory");
  EXPECT_EQ(o.header[1], "fork support");
  std::set<std::string> in_doc(o.header.begin() + 2, o.header.end());
  EXPECT_EQ(in_doc.size(), o.header.size() - 2) << "a column twice in the document";
  std::set<std::string> in_table;
  for (const MatrixKernel& k : MatrixKernels())
    for (int rc : k.rdma_cores) in_table.insert(MatrixColumn(k, rc));
  EXPECT_EQ(in_doc, in_table);
  // Each kernel has its own section, under its release.
  for (const MatrixKernel& k : MatrixKernels()) {
    EXPECT_NE(doc.find("\n## Kernel " + std::string(k.release) + "\n"), std::string::npos)
        << k.release;
    EXPECT_EQ(KernelSeries(k.release), k.series) << k.release;
  }
}

TEST(MatrixCells, RowLabelsAreTheDocumentsRows) {
  Overview o = ReadOverview(ReadDoc());
  ASSERT_FALSE(o.rows.empty());
  for (facts::MemoryKind k :
       {facts::MemoryKind::kAnonymous, facts::MemoryKind::kThp, facts::MemoryKind::kHugetlb,
        facts::MemoryKind::kShared, facts::MemoryKind::kPrivateFile}) {
    ASSERT_NE(MatrixRowKind(k), nullptr) << facts::MemoryKindName(k);
    for (const char* fs : {kMatrixForkSupportOff, kMatrixForkSupportEnv, kMatrixForkSupportInit})
      EXPECT_EQ(o.rows.count({MatrixRowKind(k), fs}), 1u) << MatrixRowKind(k) << " | " << fs;
  }
  EXPECT_EQ(MatrixRowKind(facts::MemoryKind::kUnknown), nullptr);
  for (const char* fs : {kMatrixForkSupportEnvHugepages, kMatrixForkSupportInitHugepages})
    EXPECT_EQ(o.rows.count({MatrixRowKind(facts::MemoryKind::kHugetlb), fs}), 1u) << fs;
}

TEST(MatrixCells, SeriesOfARelease) {
  EXPECT_EQ(KernelSeries("6.18.44-fc-v1272"), "6.18");
  EXPECT_EQ(KernelSeries("5.10.0-32-amd64"), "5.10");
  EXPECT_EQ(KernelSeries("6.12.117+deb13-amd64"), "6.12");
  EXPECT_EQ(KernelSeries("6.1"), "6.1");
  EXPECT_EQ(KernelSeries("6"), "");
  EXPECT_EQ(KernelSeries("v6.1"), "");
  EXPECT_EQ(KernelSeries(""), "");
}

TEST(MatrixCells, KernelBySeries) {
  const MatrixKernel* k = MatrixKernelFor("6.1.0-30-amd64");
  ASSERT_NE(k, nullptr);
  EXPECT_STREQ(k->series, "6.1");  // not 6.12
  k = MatrixKernelFor("6.12.9-amd64");
  ASSERT_NE(k, nullptr);
  EXPECT_STREQ(k->series, "6.12");
  EXPECT_EQ(MatrixKernelFor("6.18.44-fc-v1272"), nullptr);
  EXPECT_EQ(MatrixKernelFor("5.15.0-91-generic"), nullptr);
  EXPECT_EQ(MatrixKernelFor("garbage"), nullptr);
}

TEST(MatrixCells, RdmaCores) {
  EXPECT_EQ(MatrixRdmaCores(), (std::vector<int>{33, 44, 56}));
  const MatrixKernel* k = MatrixKernelFor("5.10.0-32-amd64");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(MatrixHasRdmaCore(*k, 44));
  EXPECT_FALSE(MatrixHasRdmaCore(*k, 50));
  EXPECT_EQ(NearestMatrixRdmaCores(50), (std::vector<int>{44, 56}));
  EXPECT_EQ(NearestMatrixRdmaCores(60), (std::vector<int>{56}));
  EXPECT_EQ(NearestMatrixRdmaCores(28), (std::vector<int>{33}));
  EXPECT_EQ(MatrixColumn(*k, 33), "5.10.0-32-amd64 rdma-core 33");
}

}  // namespace
}  // namespace forkguard::cli
