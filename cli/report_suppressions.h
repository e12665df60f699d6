// Suppression files in the report (`forkguard report --suppressions FILE`,
// `--emit-suppressions`): the format and the matcher are the shim's (formats/suppressions.h), so
// the report silences exactly the forks the shim would. A suppressed fork keeps its place in
// the report under the verdict "suppressed" and is counted against the entry that matched;
// forks the shim suppressed at run time (their event names the entry) are counted the same.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli/event_log.h"
#include "cli/job_report.h"
#include "cli/json.h"
#include "formats/suppressions.h"

namespace forkguard::cli {

class Symbolizer;

// A suppression file with bad lines: each was printed on stderr as one line
// ("forkguard report: FILE:LINE: what (valid keys: ...)") before this is thrown.
class BadSuppressionFile : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SuppressionFile {
  std::string path;
  std::unique_ptr<SuppressionSet> set;
};

// Reads and parses `path`; prints every bad line and throws BadSuppressionFile, or throws
// flags::UsageError when the file cannot be read.
SuppressionFile LoadSuppressionFile(const std::string& path, const char* program);

// Entry text -> its use, per job id.
using SuppressionTally = std::map<std::string, std::map<std::string, SuppressionUse>>;

// Every hazardous fork site of `logs` (ProcessLog::fork_sites, with its samples) that an entry
// of `file` matches (file may be null: only the sites the shim already suppressed) becomes
// verdict "suppressed" and is tallied; its forks leave the timeline's hazard bins. Native
// frames of those sites are symbolized first (function and file:line can then match).
void ApplySuppressions(LogSet* logs, const SuppressionFile* file, Symbolizer* sym,
                       SuppressionTally* tally);

// Fills r->suppressions for `job` (null: every job) from the tally, in file order; entries
// only the shim's logs name come last.
void FillSuppressionUse(const SuppressionTally& tally, const SuppressionFile* file,
                        const std::string* job, JobReport* r);

// A suppression file for the report's hazardous sites: one entry per site, keyed by the
// function (and Python file, or library) of the frame that names the site, not by line.
// Names from the logs are hostile: each entry reads back through the shim's parser to exactly
// the pattern written, which matches only that name (its glob characters written as '?',
// a name too long cut and ended with '*'); comments carry no control character.
std::string EmitSuppressions(const JobReport& r);

// The report's "suppressed" section (text); "" when no suppression was given or used.
std::string SuppressionsText(const JobReport& r, size_t width);
// "suppressions" and "suppressed_sites" members of the JSON report (absent when unused).
void AddSuppressionsJson(const JobReport& r, Json* report);

}  // namespace forkguard::cli
