#include "cli/report_ci.h"

#include <cctype>
#include <cstdlib>

#include "cli/format.h"
#include "cli/json.h"
#include "cli/report_baseline.h"
#include "cli/report_phrases.h"
#include "cli/stack_view.h"

namespace forkguard::cli {
namespace {

constexpr const char* const (&kKinds)[3] = schema::kReasonNames;

const char* KindTitle(const std::string& kind) {
  if (kind == schema::kReasonChildSegv)
    return "fork after RDMA init: children SIGSEGV on registered memory";
  if (kind == schema::kReasonParentCorruption)
    return "fork after RDMA init: silent parent memory corruption";
  if (kind == schema::kReasonInheritedRdma)
    return "fork after RDMA init: child inherits unusable RDMA objects";
  return "fork after RDMA init";
}

// SARIF level and GitHub command of a kind: the two that lose data or kill are errors.
bool IsError(const std::string& kind) { return kind != schema::kReasonInheritedRdma; }

std::string Message(const ForkGroup& g) {
  std::string reasons;
  for (const auto& [k, n] : g.reasons) reasons += (reasons.empty() ? "" : ", ") + k;
  std::string s = "fork() after RDMA initialization";
  if (g.count > 1) s += " ×" + std::to_string(g.count);
  s += " " + ProcessesPhrase(g) + " (" + reasons + "). ";
  if (!g.init_call.empty()) {
    SourceSpot init = SiteSpot(g.init_stack);
    s += "RDMA was first initialized by " + g.init_call +
         (g.init_device.empty() ? "" : " on " + g.init_device) +
         (init.file.empty() ? "" : " at " + init.file + ":" + std::to_string(init.line)) + ". ";
  }
  return s + "Fix: " + FixFor(g);
}

// GitHub links an annotation (and code scanning a SARIF result) to a file by its path in
// the repository: inside a workflow, paths under $GITHUB_WORKSPACE are made relative to it.
std::string RepoPath(const std::string& path) {
  const char* ws = getenv("GITHUB_WORKSPACE");
  if (ws == nullptr || ws[0] == '\0') return path;
  std::string root = ws;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (path.size() > root.size() + 1 && path.compare(0, root.size(), root) == 0 &&
      path[root.size()] == '/')
    return path.substr(root.size() + 1);
  return path;
}

// A URI reference for a path: absolute paths as file:// URIs, relative ones as they are,
// everything outside the unreserved set and '/' percent-encoded.
std::string PathUri(const std::string& path) {
  std::string out = path.size() > 0 && path[0] == '/' ? "file://" : "";
  static const char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// A SARIF message (plain text, where "[text](target)" is an embedded link): SarifMessageText.
Json Text(const std::string& s) {
  Json o = Json::object();
  o["text"] = SarifMessageText(s);
  return o;
}

// A SARIF location for a stack's site: physical (file:line) when symbolized, and a logical
// location naming the function.
Json SarifLocation(const Stack& st, int id, const std::string& message) {
  SourceSpot spot = SiteSpot(st);
  Json loc = Json::object();
  if (id > 0) loc["id"] = id;
  if (!spot.file.empty()) {
    Json phys = Json::object();
    Json art = Json::object();
    art["uri"] = PathUri(RepoPath(spot.file));
    phys["artifactLocation"] = std::move(art);
    if (spot.line > 0) {
      Json region = Json::object();
      region["startLine"] = spot.line;
      phys["region"] = std::move(region);
    }
    loc["physicalLocation"] = std::move(phys);
  }
  std::string name = !spot.function.empty() ? spot.function : SiteHeading(st);
  if (!name.empty()) {
    Json ll = Json::object();
    ll["name"] = name;
    ll["kind"] = "function";
    Json lls = Json::array();
    lls.push_back(std::move(ll));
    loc["logicalLocations"] = std::move(lls);
  }
  if (!message.empty()) loc["message"] = Text(message);
  return loc;
}

std::string SiteName(const ForkGroup& g) {
  std::string where = SiteHeading(g.stack);
  return where.empty() ? (g.site.empty() ? "<unknown call site>" : "site " + g.site) : where;
}

bool IsNew(const JobReport& r, size_t i) { return i >= r.hazard_new.size() || r.hazard_new[i]; }

}  // namespace

std::string PrimaryKind(const ForkGroup& g) {
  for (const char* k : kKinds)
    if (g.reasons.count(k)) return k;
  return g.reasons.empty() ? schema::kReasonInheritedRdma : g.reasons.begin()->first;
}

SourceSpot SiteSpot(const Stack& s) {
  SourceSpot spot;
  StackView v = ViewStack(s);
  if (v.python) {
    const Frame& f = s[v.head];
    spot.file = f.py_file;
    spot.line = static_cast<int>(f.py_line);
    spot.function = f.py_func;
    return spot;
  }
  for (const Frame& f : s) {
    if (IsPlumbingFrame(f)) continue;
    if (spot.function.empty()) spot.function = !f.func.empty() ? f.func : f.sym;
    if (!f.src_file.empty()) {
      spot.file = f.src_file;
      spot.line = f.src_line;
      if (!f.func.empty()) spot.function = f.func;
      return spot;
    }
  }
  return spot;
}

std::string RenderSarif(const JobReport& r, const std::string& version) {
  Json rules = Json::array();
  for (const char* k : kKinds) {
    Json rule = Json::object();
    rule["id"] = k;
    rule["name"] = k;
    rule["shortDescription"] = Text(KindTitle(k));
    rule["fullDescription"] = Text(ExplainReason(k));
    Json conf = Json::object();
    conf["level"] = IsError(k) ? "error" : "warning";
    rule["defaultConfiguration"] = std::move(conf);
    rule["help"] = Text(
        "Create the loader workers before RDMA initialization, or start them "
        "with spawn/forkserver (posix_spawn) instead of fork.");
    rules.push_back(std::move(rule));
  }
  Json driver = Json::object();
  driver["name"] = "forkguard";
  driver["version"] = version;
  driver["semanticVersion"] = version;
  driver["rules"] = std::move(rules);
  Json tool = Json::object();
  tool["driver"] = std::move(driver);

  Json results = Json::array();
  auto add = [&](const ForkGroup& g, int id, const char* suppression, bool baseline_known) {
    std::string kind = PrimaryKind(g);
    Json res = Json::object();
    res["ruleId"] = kind;
    int index = 0;
    for (int i = 0; i < 3; ++i)
      if (kind == kKinds[i]) index = i;
    res["ruleIndex"] = index;
    res["level"] = IsError(kind) ? "error" : "warning";
    res["message"] = Text(Message(g));
    Json locs = Json::array();
    locs.push_back(SarifLocation(g.stack, 0, ""));
    res["locations"] = std::move(locs);
    if (!g.init_call.empty()) {
      Json rel = Json::array();
      rel.push_back(SarifLocation(g.init_stack, 1,
                                  "RDMA first initialized here (" + g.init_call +
                                      (g.init_device.empty() ? "" : " on " + g.init_device) + ")"));
      res["relatedLocations"] = std::move(rel);
    }
    if (baseline_known) res["baselineState"] = "unchanged";
    if (!r.baseline_file.empty() && !baseline_known) res["baselineState"] = "new";
    if (suppression != nullptr) {
      Json sup = Json::object();
      sup["kind"] = "external";
      sup["status"] = "accepted";
      sup["justification"] = suppression;
      Json sups = Json::array();
      sups.push_back(std::move(sup));
      res["suppressions"] = std::move(sups);
    }
    // Stable across moved lines (the baseline's key): what code scanning tracks results by.
    std::vector<std::string> reasons;
    for (const auto& [name, n] : g.reasons) reasons.push_back(name);
    Json fp = Json::object();
    fp["forkguardSite/v1"] = BaselineKey(reasons, g.stack);
    res["partialFingerprints"] = std::move(fp);
    Json props = Json::object();
    props["reportId"] = id;
    props["forks"] = g.count;
    if (g.fix_tally.forks > 0) props["fixedForks"] = g.fix_tally.forks;  // made safe by fix mode
    props["processes"] = static_cast<int64_t>(g.processes.size());
    Json ranks = Json::array();
    for (int64_t x : g.ranks) ranks.emplace_back(x);
    props["ranks"] = std::move(ranks);
    Json kinds = Json::array();
    for (const auto& [name, n] : g.reasons) kinds.emplace_back(name);
    props["reasons"] = std::move(kinds);
    if (!g.job.empty()) props["job"] = g.job;
    res["properties"] = std::move(props);
    results.push_back(std::move(res));
  };
  int id = 0;
  for (size_t i = 0; i < r.hazard_groups.size(); ++i)
    add(r.hazard_groups[i], ++id, nullptr, !IsNew(r, i));
  id += static_cast<int>(r.clean_groups.size());
  for (const ForkGroup& g : r.suppressed_groups) add(g, ++id, "forkguard suppression file", false);

  Json run = Json::object();
  run["tool"] = std::move(tool);
  run["results"] = std::move(results);
  Json runs = Json::array();
  runs.push_back(std::move(run));
  Json doc = Json::object();
  doc["$schema"] = kSarifSchemaUri;
  doc["version"] = "2.1.0";
  doc["runs"] = std::move(runs);
  return WriteJson(doc) + "\n";
}

std::string RenderJunit(const JobReport& r) {
  int64_t failures = 0, skipped = 0;
  for (size_t i = 0; i < r.hazard_groups.size(); ++i) (IsNew(r, i) ? failures : skipped) += 1;
  skipped += static_cast<int64_t>(r.suppressed_groups.size());
  int64_t tests = static_cast<int64_t>(r.hazard_groups.size() + r.suppressed_groups.size() +
                                       r.clean_groups.size());
  std::string counts = " tests=\"" + std::to_string(tests) + "\" failures=\"" +
                       std::to_string(failures) + "\" errors=\"0\" skipped=\"" +
                       std::to_string(skipped) + "\"";
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"forkguard\"" + counts + ">\n";
  out += "  <testsuite name=\"forkguard\"" + counts + ">\n";
  auto testcase = [&](const ForkGroup& g, const std::string& classname, const std::string& body) {
    SourceSpot spot = SiteSpot(g.stack);
    out += "    <testcase classname=\"" + XmlText(classname) + "\" name=\"" + XmlText(SiteName(g)) +
           "\"";
    if (!spot.file.empty())
      out += " file=\"" + XmlText(spot.file) + "\" line=\"" + std::to_string(spot.line) + "\"";
    out += body.empty() ? "/>\n" : ">\n" + body + "    </testcase>\n";
  };
  for (size_t i = 0; i < r.hazard_groups.size(); ++i) {
    const ForkGroup& g = r.hazard_groups[i];
    std::string kind = PrimaryKind(g);
    std::string body;
    if (IsNew(r, i)) {
      // One line each, escaped apart: a name cannot add a line to the failure's text.
      std::string detail = "fork called at:\n";
      for (const auto& l : StackLines(g.stack, false)) detail += XmlText("  " + l) + "\n";
      if (!g.init_call.empty()) {
        detail += XmlText(InitPhrase(g)) + "\n";
        for (const auto& l : StackLines(g.init_stack, false)) detail += XmlText("  " + l) + "\n";
      }
      body = "      <failure type=\"" + XmlText(kind) + "\" message=\"" + XmlText(Message(g)) +
             "\">" + detail + "</failure>\n";
    } else {
      body = "      <skipped message=\"in the baseline " + XmlText(r.baseline_file) + "\"/>\n";
    }
    testcase(g, "forkguard." + kind, body);
  }
  for (const ForkGroup& g : r.suppressed_groups)
    testcase(g, "forkguard." + PrimaryKind(g),
             "      <skipped message=\"suppressed (" +
                 XmlText(r.suppressions_file.empty() ? "by the shim" : r.suppressions_file) +
                 ")\"/>\n");
  for (const ForkGroup& g : r.clean_groups) testcase(g, "forkguard.clean", "");
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

std::string RenderGithub(const JobReport& r) {
  std::string out;
  for (size_t i = 0; i < r.hazard_groups.size(); ++i) {
    const ForkGroup& g = r.hazard_groups[i];
    std::string kind = PrimaryKind(g);
    const char* command = !IsNew(r, i) ? "notice" : IsError(kind) ? "error" : "warning";
    SourceSpot spot = SiteSpot(g.stack);
    std::string props;
    if (!spot.file.empty()) {
      props += "file=" + GithubCommandProperty(RepoPath(spot.file));
      if (spot.line > 0) props += ",line=" + std::to_string(spot.line);
      props += ",";
    }
    props += "title=" + GithubCommandProperty("forkguard " + kind + ": " + KindTitle(kind) +
                                              (IsNew(r, i) ? "" : " (in the baseline)"));
    out += "::" + std::string(command) + " " + props +
           "::" + GithubCommandData(SiteName(g) + ": " + Message(g)) + "\n";
  }
  return out;
}

}  // namespace forkguard::cli
