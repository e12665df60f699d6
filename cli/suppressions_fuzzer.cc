// libFuzzer target: suppression files (formats/suppressions.h, the parser and matcher the shim
// and `forkguard report --suppressions` share) and their application to a report. The input
// is a program (cli/fuzz_log_program.h): a suppression file (generated entries, or the raw
// bytes of the input) and a small event log whose hazardous forks it may match.
// Build: `bazel build //cli:suppressions_fuzzer` (clang, bazel/fuzz.bzl); scripts/fuzz runs it.
//
// Besides sanitizer errors it aborts when the parser breaks its contract: an entry whose
// pattern, program or text is not a terminated string of its field, an entry without a frame
// or a kind, an entry's canonical text that does not parse back to the same entry, a glob
// that disagrees with fnmatch(3) on patterns both read alike, a report whose suppression
// section carries control characters. FORKGUARD_FUZZ_CRASHES_ONLY=1: crashes and sanitizer
// errors only.
#include <fnmatch.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/event_log.h"
#include "cli/fuzz_log_program.h"
#include "cli/job_report.h"
#include "cli/json.h"
#include "cli/report_render.h"
#include "cli/report_suppressions.h"
#include "formats/suppressions.h"

namespace {

using forkguard::Suppression;
using forkguard::SuppressionSet;

void Expect(bool ok, const char* what, const std::string& detail) {
  // FORKGUARD_FUZZ_CRASHES_ONLY=1: sanitizer errors and crashes only (to look past a known
  // contract breach).
  static const bool crashes_only = std::getenv("FORKGUARD_FUZZ_CRASHES_ONLY") != nullptr;
  if (ok || crashes_only) return;
  std::fprintf(stderr, "suppressions_fuzzer: %s\n--- detail (first 2000 bytes) ---\n%.2000s\n",
               what, detail.c_str());
  std::abort();
}

void Ignore(int, const char*, void*) {}

bool Terminated(const char* field, size_t size) { return ::strnlen(field, size) < size; }

void CheckEntry(const Suppression& s) {
  std::string text(s.text, ::strnlen(s.text, sizeof s.text));
  Expect(Terminated(s.text, sizeof s.text), "entry text not terminated", text);
  Expect(Terminated(s.program, sizeof s.program), "program not terminated", text);
  Expect(s.frame_count >= 1 && s.frame_count <= Suppression::kMaxFrames, "frame count", text);
  Expect(s.rank_count >= 0 && s.rank_count <= Suppression::kMaxRanks, "rank count", text);
  Expect(s.kinds != 0 && (s.kinds & ~forkguard::kSuppressAllKinds) == 0, "kinds", text);
  for (int i = 0; i < s.frame_count; ++i) {
    Expect(Terminated(s.frames[i].pattern, sizeof s.frames[i].pattern), "pattern not terminated",
           text);
  }
  // The canonical text (what logs and reports name the entry by) is one entry of its own.
  auto again = std::make_unique<SuppressionSet>();
  int bad = forkguard::ParseSuppressions(s.text, std::strlen(s.text), again.get(), Ignore, nullptr);
  Expect(bad == 0 && again->count == 1, "canonical text does not parse back", text);
  const Suppression& t = again->entries[0];
  Expect(std::strcmp(t.text, s.text) == 0 && t.kinds == s.kinds && t.frame_count == s.frame_count &&
             t.rank_count == s.rank_count && std::strcmp(t.program, s.program) == 0,
         "canonical text parses to another entry", text);
  for (int i = 0; i < s.frame_count; ++i) {
    Expect(t.frames[i].kind == s.frames[i].kind && t.frames[i].line == s.frames[i].line &&
               std::strcmp(t.frames[i].pattern, s.frames[i].pattern) == 0,
           "canonical text parses to another frame", text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace forkguard::cli;
  FuzzedDataProvider in(data, size);
  const int mode = in.ConsumeIntegralInRange<int>(0, 3);

  // The glob against fnmatch(3), which reads `*` and `?` the same when the pattern has no
  // bracket or backslash and no flags are given (`*` matches `/` too).
  std::string pattern =
      in.ConsumeBool() ? fuzz::GenerateName(&in) : in.ConsumeRandomLengthString(40);
  std::string subject =
      in.ConsumeBool() ? fuzz::GenerateName(&in) : in.ConsumeRandomLengthString(40);
  if (pattern.size() < 200 && subject.size() < 200 &&
      pattern.find_first_of("[\\") == std::string::npos &&
      pattern.find('\0') == std::string::npos && subject.find('\0') == std::string::npos) {
    bool ours = forkguard::SuppressionGlobMatch(pattern.c_str(), subject.c_str());
    bool libc = ::fnmatch(pattern.c_str(), subject.c_str(), 0) == 0;
    Expect(ours == libc, "glob disagrees with fnmatch", pattern + "\n" + subject);
  }

  std::string text =
      mode == 0 ? in.ConsumeRandomLengthString(4096) : fuzz::GenerateSuppressions(&in, 12);
  SuppressionFile supp;
  supp.path = "fuzz.supp";
  supp.set = std::make_unique<SuppressionSet>();
  int bad = forkguard::ParseSuppressions(text.data(), text.size(), supp.set.get(), Ignore, nullptr);
  Expect(bad >= 0 && supp.set->count >= 0 && supp.set->count <= SuppressionSet::kMaxEntries,
         "entry count", text);
  for (int i = 0; i < supp.set->count; ++i) CheckEntry(supp.set->entries[i]);

  // Matching a fork the shim would see: frames named like the generated entries.
  std::vector<std::string> names;
  for (int i = 0; i < 4; ++i) names.push_back(fuzz::GenerateName(&in));
  forkguard::SuppressionFrameFacts frames[2];
  frames[0].func = names[0].c_str();
  frames[0].lib = names[1].c_str();
  frames[1].file = names[2].c_str();
  frames[1].line = in.ConsumeIntegral<int>();
  forkguard::SuppressionQuery q;
  q.kinds = in.ConsumeIntegralInRange<unsigned>(0, 7);
  q.program = names[3].c_str();
  q.rank = in.ConsumeIntegral<long>();
  q.frames = frames;
  q.frame_count = in.ConsumeIntegralInRange<int>(0, 2);
  int at = forkguard::MatchSuppression(*supp.set, q);
  Expect(at >= -1 && at < supp.set->count, "match index", text);

  // The report's application of the file to a small job's logs.
  LogSet logs;
  for (const fuzz::LogFile& f : fuzz::GenerateLogs(&in, 10)) ParseLogText(f.name, f.text, &logs);
  JoinExecs(&logs);
  SuppressionTally tally;
  ApplySuppressions(&logs, &supp, nullptr, &tally);
  JobReport r = BuildJobReport(logs, nullptr);
  FillSuppressionUse(tally, &supp, nullptr, &r);
  std::string section = SuppressionsText(r, 100);
  for (unsigned char c : section)
    Expect(c >= 0x20 || c == '\n' || c == '\t', "suppressed section carries control characters",
           section);
  Json doc;
  std::string err;
  std::string json = RenderJson(r);
  Expect(ParseJson(json, &doc, &err), "JSON report with suppressions does not parse", json);
  RenderText(r, 100, false);
  return 0;
}
