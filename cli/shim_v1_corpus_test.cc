// Logs the real shim wrote in the /1 schema (cli/testdata/shim_v1/README.md)
// give the same JSON report as the reader of that time did: the same
// findings, processes, forks, deaths and notes (a note's parser detail after
// the kind may differ).
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "cli/event_log.h"
#include "cli/job_report.h"
#include "cli/json.h"
#include "cli/report_json.h"
#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The notes' texts cut to their kind ("truncated last line (...)").
void CutNoteDetails(Json* report) {
  auto notes = report->find("notes");
  if (notes == report->end() || !notes->is_array()) return;
  for (Json& n : *notes) {
    if (!n.is_object()) continue;
    auto text = n.find("text");
    if (text == n.end() || !text->is_string()) continue;
    std::string t = text->get<std::string>();
    size_t colon = t.find("): ");
    if (colon != std::string::npos) *text = t.substr(0, colon + 1);
  }
}

class ShimV1Corpus : public ::testing::TestWithParam<const char*> {};

TEST_P(ShimV1Corpus, SameReportAsBefore) {
  std::string rel = std::string("cli/testdata/shim_v1/") + GetParam();
  std::string expected_path = forkguard::test_support::Runfile(rel + ".report.json");
  // Run from the runfiles root so that the paths in the report are the
  // workspace-relative ones the expected report was made with.
  std::string root = expected_path.substr(0, expected_path.size() - (rel.size() + 12));
  ASSERT_EQ(chdir(root.c_str()), 0) << root;
  LogSet logs;
  ReadLogs({rel}, &logs);
  JobReport r = BuildJobReport(logs, nullptr);
  Json got, want;
  std::string err;
  ASSERT_TRUE(ParseJson(RenderJson(r), &got, &err)) << err;
  ASSERT_TRUE(ParseJson(Slurp(expected_path), &want, &err)) << err;
  CutNoteDetails(&got);
  CutNoteDetails(&want);
  EXPECT_EQ(WriteJson(got), WriteJson(want));
  // And the findings are what each case is about.
  const Json* s = FindMember(got, "summary");
  ASSERT_TRUE(s);
  std::string c = GetParam();
  EXPECT_EQ(GetInt(*s, "hazard_forks", -1), c == "clean" ? 0 : 1);
  EXPECT_EQ(GetInt(*s, "children_segv", -1), c == "segv" ? 1 : 0);
  EXPECT_EQ(GetInt(*s, "lines_skipped", -1), c == "truncated" ? 1 : 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, ShimV1Corpus,
                         ::testing::Values("hazard", "clean", "segv", "python", "truncated"));

}  // namespace
}  // namespace forkguard::cli
