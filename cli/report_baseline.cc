#include "cli/report_baseline.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/format.h"
#include "cli/report_json.h"
#include "flags/flags.h"

namespace forkguard::cli {
namespace {

Stack StackFromJson(const Json* a) {
  Stack st;
  if (a == nullptr || !a->is_array()) return st;
  for (const Json& x : *a) {
    Frame f;
    if (FindMember(x, "py_func") != nullptr || FindMember(x, "py_file") != nullptr) {
      f.python = true;
      f.py_func = GetString(x, "py_func");
      f.py_file = GetString(x, "py_file");
      f.py_line = GetInt(x, "py_line", 0);
    } else {
      f.obj = GetString(x, "obj");
      f.sym = GetString(x, "sym");
      f.func = GetString(x, "func");
    }
    st.push_back(std::move(f));
  }
  return st;
}

void AddKeys(const Json* sites, std::set<std::string>* keys) {
  if (sites == nullptr || !sites->is_array()) return;
  for (const Json& g : *sites) {
    std::vector<std::string> reasons;
    if (const Json* r = FindMember(g, "reasons"); r != nullptr && r->is_object())
      for (const auto& [name, n] : r->items()) reasons.push_back(name);
    keys->insert(BaselineKey(reasons, StackFromJson(FindMember(g, "stack"))));
  }
}

}  // namespace

std::string BaselineKey(const std::vector<std::string>& reasons_in, const Stack& stack) {
  std::vector<std::string> reasons = reasons_in;
  std::sort(reasons.begin(), reasons.end());
  reasons.erase(std::unique(reasons.begin(), reasons.end()), reasons.end());
  std::string key;
  for (const auto& r : reasons) key += (key.empty() ? "" : ",") + r;
  key += "|";
  bool python = std::any_of(stack.begin(), stack.end(), [](const Frame& f) { return f.python; });
  for (const Frame& f : stack) {
    if (f.python != python) continue;
    if (python) {
      key += f.py_func + "@" + Basename(f.py_file) + ";";
    } else {
      // The dynamic symbol is in every report (symbolized or not); libdw's name only
      // where the shim saw none (static functions).
      key += (!f.sym.empty() ? f.sym : f.func) + "@" + Basename(f.obj) + ";";
    }
  }
  return key;
}

Baseline LoadBaseline(const std::string& path) {
  std::string text, error;
  if (!ReadInputFile(path, kMaxInputBytes, &text, &error))
    throw flags::UsageError("cannot read the baseline " + path + " (" + error + ")");
  Json doc;
  if (!ParseJson(text, &doc, &error))
    throw flags::UsageError("the baseline " + path + " is not JSON (" + error + ")");
  if (GetString(doc, "schema") != kReportSchema)
    throw flags::UsageError("the baseline " + path + " is not a forkguard report --format json (" +
                            "schema \"" + kReportSchema + "\")");
  Baseline b;
  b.path = path;
  AddKeys(FindMember(doc, "findings"), &b.keys);
  AddKeys(FindMember(doc, "suppressed_sites"), &b.keys);
  return b;
}

int MarkNewSites(const Baseline& b, JobReport* r) {
  r->baseline_file = b.path;
  r->hazard_new.clear();
  int fresh = 0;
  for (const ForkGroup& g : r->hazard_groups) {
    std::vector<std::string> reasons;
    for (const auto& [name, n] : g.reasons) reasons.push_back(name);
    bool is_new = b.keys.count(BaselineKey(reasons, g.stack)) == 0;
    r->hazard_new.push_back(is_new);
    fresh += is_new;
  }
  return fresh;
}

std::string BaselineText(const JobReport& r, size_t width) {
  if (r.baseline_file.empty()) return "";
  int64_t fresh = std::count(r.hazard_new.begin(), r.hazard_new.end(), true);
  int64_t known = static_cast<int64_t>(r.hazard_new.size()) - fresh;
  return "\n" +
         Fit("baseline " + r.baseline_file + ": " +
                 Plural(fresh, "new hazardous call site", "new hazardous call sites") + ", " +
                 std::to_string(known) + " already in the baseline",
             width) +
         "\n";
}

void AddBaselineJson(const JobReport& r, Json* report) {
  if (r.baseline_file.empty()) return;
  Json o = Json::object();
  o["file"] = r.baseline_file;
  Json ids = Json::array();
  int64_t fresh = 0;
  for (size_t i = 0; i < r.hazard_new.size(); ++i) {
    if (!r.hazard_new[i]) continue;
    ++fresh;
    ids.emplace_back(static_cast<int64_t>(i) + 1);
  }
  o["new_sites"] = fresh;
  o["known_sites"] = static_cast<int64_t>(r.hazard_new.size()) - fresh;
  o["new_finding_ids"] = std::move(ids);
  (*report)["baseline"] = std::move(o);
}

}  // namespace forkguard::cli
