// Every report format over logs whose names are hostile (another user can write the shared log
// root): control characters, line breaks followed by CI workflow commands, terminal escapes,
// Markdown links, and the placeholders the JSON report and the HTML page once spliced at.
// Names must stay text on their own line; each document must stay well formed.
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/event_log.h"
#include "cli/format.h"
#include "cli/job_report.h"
#include "cli/job_timeline.h"
#include "cli/json.h"
#include "cli/report_ci.h"
#include "cli/report_html.h"
#include "cli/report_render.h"
#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

// One process that opens a device and forks after it; every name carries a payload.
constexpr char kHostileLog[] =
    R"LOG({"schema":"forkguard.event/1","event":"process_start","ts_ns":1764500000000000000,"pid":4242,"ppid":1,"tid":4242,"host":"h1\r::warning::host[h](https://evil.example)","prog":"train\n::error::forged\u001b]0;pwned\u0007\u001b[2J\u009b31m[x](https://evil.example)","rank":0,"seq":0,"argv":["trainer"],"mode":"warn"}
{"schema":"forkguard.event/1","event":"rdma_init","ts_ns":1764500000000001000,"pid":4242,"ppid":1,"tid":4242,"host":"h1\r::warning::host[h](https://evil.example)","prog":"train","rank":0,"seq":1,"call":"ibv_open_device\n::error::init","device":"rxe0\u001b[31m\u202e![i](https://evil.example/i.png)","stack":[]}
{"schema":"forkguard.event/1","event":"fork","ts_ns":1764500000000002000,"pid":4242,"ppid":1,"tid":4242,"host":"h1\r::warning::host[h](https://evil.example)","prog":"train","rank":0,"seq":2,"verdict":"hazard","reasons":["child-segv"],"action":"proceeded","site":"abc","stack":[{"py":{"file":"/home/u/tr`ai|n.py\n::error file=x::py","line":7,"func":"f\r\n::error::func\u001b[31m<b>[y](https://evil.example)"}},{"ip":"0x7f0012","obj":"/nonexistent/lib\nx.so","off":"0x12","sym":"sym\n::error::sym"}]}
)LOG";

// A process named like the JSON report's and the HTML page's placeholders, byte for byte (in
// their C++ literals "\x01f" is one escape: 0x1f).
constexpr char kPlaceholderLog[] =
    R"LOG({"schema":"forkguard.event/1","event":"process_start","ts_ns":1764500000000000000,"pid":77,"ppid":1,"tid":77,"host":"\u001forkguard: the forks array\u0002","prog":"\u001forkguard: the marks\u0002","rank":null,"seq":0,"argv":["x"],"mode":"warn"}
{"schema":"forkguard.event/1","event":"fork","ts_ns":1764500000000002000,"pid":77,"ppid":1,"tid":77,"host":"\u001forkguard: the forks array\u0002","prog":"\u001forkguard: the marks\u0002","rank":null,"seq":1,"verdict":"clean","reasons":[],"action":"proceeded","site":"def","stack":[]}
)LOG";

struct Logs {
  LogSet logs;
  JobReport report;
};

Logs Read(const char* text) {
  std::string dir = forkguard::test_support::MakeTempDir("formats");
  std::ofstream(dir + "/forkguard.h1.4242.1764500000000000000.jsonl") << text;
  Logs l;
  ReadLogs({dir}, &l.logs);
  l.report = BuildJobReport(l.logs, nullptr);
  return l;
}

std::vector<std::string> SplitLines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t nl; (nl = s.find('\n', pos)) != std::string::npos; pos = nl + 1)
    out.push_back(s.substr(pos, nl - pos));
  if (pos < s.size()) out.push_back(s.substr(pos));
  return out;
}

// Each line holds only text: no control character, no bidi override, valid UTF-8 (what
// EscapeText leaves as it is); none starts a workflow command unless `commands` allows it.
void ExpectOnlyText(const std::string& format, const std::string& out, bool commands = false) {
  ASSERT_FALSE(out.empty()) << format;
  for (const std::string& line : SplitLines(out)) {
    EXPECT_EQ(EscapeText(line), line) << format << " line: " << line;
    if (!commands) {
      EXPECT_NE(line.rfind("::", 0), 0u) << format << " line: " << line;
    }
  }
}

TEST(ReportFormats, HostileNamesStayTextOnTheirLine) {
  Logs l = Read(kHostileLog);
  const JobReport& r = l.report;
  ASSERT_EQ(r.hazard_groups.size(), 1u);
  std::string text = RenderText(r);
  ExpectOnlyText("text", text);
  EXPECT_NE(text.find("train\\x0a::error::forged\\x1b]0;pwned\\x07"), std::string::npos) << text;
  EXPECT_NE(text.find("host h1\\x0d::warning::host[h](https://evil.example)"), std::string::npos)
      << text;
  ExpectOnlyText("text --native", RenderText(r, 100, true));
}

// Markdown outside fenced blocks and code spans (where nothing is markup).
std::string OutsideCode(const std::string& md) {
  std::string out;
  bool fenced = false;
  for (const std::string& line : SplitLines(md)) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    for (size_t i = 0; i < line.size();) {
      if (line[i] != '`' || (i > 0 && line[i - 1] == '\\')) {
        out += line[i++];
        continue;
      }
      size_t n = line.find_first_not_of('`', i) - i;
      std::string fence(n, '`');
      size_t close = i + n;
      while ((close = line.find(fence, close)) != std::string::npos && close + n < line.size() &&
             line[close + n] == '`')
        close = line.find_first_not_of('`', close);
      if (close == std::string::npos) {
        out += line.substr(i);
        break;
      }
      i = close + n;
    }
    out += "\n";
  }
  return out;
}

TEST(ReportFormats, MarkdownCannotBeForged) {
  Logs l = Read(kHostileLog);
  std::string md = RenderMarkdown(l.report);
  ExpectOnlyText("markdown", md);
  EXPECT_EQ(md.find('\r'), std::string::npos);
  // No link, image or HTML can open: outside code, each '[' and '<' of a name is escaped.
  std::string prose = OutsideCode(md);
  for (const char* forged : {"[h](https", "[x](https", "[y](https", "![i]", "<b>"})
    EXPECT_EQ(prose.find(forged), std::string::npos) << forged << " in\n" << prose;
  // The table's rows keep their 8 cells (7 columns).
  for (const std::string& line : SplitLines(md)) {
    if (line.rfind("| 1 |", 0) != 0) continue;
    size_t pipes = 0;
    for (size_t i = 0; i < line.size(); ++i)
      pipes += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    EXPECT_EQ(pipes, 8u) << line;
  }
}

// Several jobs in the logs: the text and Markdown reports name each job in a line of their
// own; a job id from a log stays text there.
TEST(ReportFormats, JobIdsStayTextInJobSections) {
  std::string dir = forkguard::test_support::MakeTempDir("jobs");
  std::ofstream(dir + "/forkguard.h1.10.1.jsonl")
      << R"J({"schema":"forkguard.event/1","event":"fork","ts_ns":5,"pid":10,"host":"h1","prog":"p","job":"7\n::error::job[j](https://evil.example)","verdict":"clean","stack":[]})J"
      << "\n";
  std::ofstream(dir + "/forkguard.h1.11.1.jsonl")
      << R"J({"schema":"forkguard.event/1","event":"fork","ts_ns":5,"pid":11,"host":"h1","prog":"p","job":"8","verdict":"clean","stack":[]})J"
      << "\n";
  for (const char* format : {"text", "markdown"}) {
    LogSet logs;
    ReadLogs({dir}, &logs);
    ReportOptions o;
    o.format = format;
    o.symbolize = false;
    int64_t hazards = 0;
    std::string out = RenderLogs(std::move(logs), o, &hazards);
    ExpectOnlyText(format, out);
    EXPECT_NE(out.find("x0a::error::job"), std::string::npos) << out;
    if (std::string(format) == "markdown") {
      EXPECT_EQ(OutsideCode(out).find("[j](https"), std::string::npos) << out;
    }
  }
}

TEST(ReportFormats, GithubCommandsOneLineEach) {
  Logs l = Read(kHostileLog);
  std::string gh = RenderGithub(l.report);
  ExpectOnlyText("github", gh, /*commands=*/true);
  std::vector<std::string> lines = SplitLines(gh);
  ASSERT_EQ(lines.size(), 1u) << gh;  // one finding, one command
  EXPECT_EQ(lines[0].rfind("::error ", 0), 0u) << gh;
  // The file property holds no ':' or ',' that would end it.
  size_t props_end = lines[0].find("::", 2);
  ASSERT_NE(props_end, std::string::npos);
  std::string props = lines[0].substr(8, props_end - 8);
  EXPECT_EQ(props.find("::"), std::string::npos) << props;
  EXPECT_NE(props.find("file=/home/u/tr`ai|n.py\\x0a%3A%3Aerror file=x%3A%3Apy,line=7,"),
            std::string::npos)
      << props;
}

TEST(ReportFormats, JunitIsWellFormedXml) {
  Logs l = Read(kHostileLog);
  std::string xml = RenderJunit(l.report);
  ExpectOnlyText("junit", xml);
  EXPECT_EQ(xml.find("<b>"), std::string::npos);
  // The failure's text: one line per frame, whatever the names hold.
  size_t a = xml.find("<failure"), b = xml.find("</failure>");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  std::string failure = xml.substr(a, b - a);
  EXPECT_NE(failure.find("\n  #0 f\\x0d\\x0a::error::func\\x1b[31m&lt;b&gt;"), std::string::npos)
      << failure;
}

TEST(ReportFormats, SarifMessagesHoldNoEmbeddedLink) {
  Logs l = Read(kHostileLog);
  Json doc;
  std::string error;
  ASSERT_TRUE(ParseJson(RenderSarif(l.report, "0"), &doc, &error)) << error;
  const Json& result = doc["runs"][0]["results"][0];
  std::string msg = result["message"]["text"].get<std::string>();
  EXPECT_EQ(msg.find("[h](https"), std::string::npos) << msg;
  EXPECT_NE(msg.find("host\\[h\\](https"), std::string::npos) << msg;
}

TEST(ReportFormats, JsonReportSplicesItsForksByPosition) {
  Logs l = Read(kPlaceholderLog);
  Json doc;
  std::string error;
  ASSERT_TRUE(ParseJson(RenderJson(l.report), &doc, &error)) << error;
  ASSERT_TRUE(doc["forks"].is_array()) << doc["forks"].dump();
  EXPECT_EQ(doc["forks"].size(), 1u);
  EXPECT_EQ(doc["summary"]["hosts"][0],
            "\x1f"
            "orkguard: the forks array\x02");
  EXPECT_EQ(WriteJson(doc) + "\n", RenderJson(l.report));
}

TEST(ReportFormats, HtmlPageSplicesItsDataByPosition) {
  Logs l = Read(kPlaceholderLog);
  Timeline t = BuildTimeline(l.logs, l.report);
  std::string page = RenderHtml(l.report, t);
  const std::string open = "<script type=\"application/json\" id=\"fg-data\">";
  size_t a = page.find(open);
  ASSERT_NE(a, std::string::npos);
  a += open.size();
  size_t b = page.find("</script>", a);
  ASSERT_NE(b, std::string::npos);
  Json data;
  std::string error;
  ASSERT_TRUE(ParseJson(page.substr(a, b - a), &data, &error)) << error;
  ASSERT_TRUE(data["M"].is_array()) << data["M"].dump();
  ASSERT_EQ(data["P"].size(), 1u);
  EXPECT_EQ(data["P"][0][4],
            "\x1f"
            "orkguard: the marks\x02");
  EXPECT_EQ(data["M"][0][0][0], "c");  // the process's first mark: its clean fork
  EXPECT_TRUE(data["findings"].is_array());
}

// --- fix mode ----------------------------------------------------------------------------
// cli/testdata/fix_mode: a process in FORKGUARD_MODE=fix whose two forks at one site were made
// safe (action "fixed"; each a 4 KiB anonymous MADV_DONTFORK range "copied" for the child and
// a 2 MiB hugetlb range "withheld" from it), and its two children; written by hand after
// formats/EVENT_LOG.md. Its text, JSON and Markdown reports are checked in next to it.

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr char kFixDir[] = "cli/testdata/fix_mode";

// The report of the fix-mode logs in `format`, read from the runfiles root (the paths in the
// report are then the workspace-relative ones the snapshots hold).
std::string FixModeReport(const char* format) {
  std::string snapshot = forkguard::test_support::Runfile("cli/testdata/fix_mode.report.txt");
  std::string root =
      snapshot.substr(0, snapshot.size() - std::string("cli/testdata/fix_mode.report.txt").size());
  EXPECT_EQ(chdir(root.c_str()), 0) << root;
  LogSet logs;
  ReadLogs({kFixDir}, &logs);
  EXPECT_TRUE(logs.notes.empty()) << logs.notes[0].where << ": " << logs.notes[0].text;
  ReportOptions o;
  o.format = format;
  o.symbolize = false;
  int64_t hazards = 0;
  return RenderLogs(std::move(logs), o, &hazards);
}

TEST(ReportFormats, FixedForksTheSameAsTheSnapshots) {
  for (const auto& [format, ext] :
       {std::pair{"text", "txt"}, {"json", "json"}, {"markdown", "md"}}) {
    std::string got = FixModeReport(format);
    std::string want =
        Slurp(forkguard::test_support::Runfile(std::string("cli/testdata/fix_mode.report.") + ext));
    ASSERT_FALSE(want.empty()) << ext;
    EXPECT_EQ(got, want) << format;
    ExpectOnlyText(format, got);
  }
}

// What the snapshots say, each number from the logs: 2 forks made safe, 2 × 4 KiB copied for
// the children (anonymous), 2 × 2 MiB withheld from them (hugetlb); still hazards (the verdict
// stands, inherited-rdma is not something fix changes), and no child counted as harmed.
TEST(ReportFormats, FixedForksCountedAsMadeSafe) {
  std::string text = FixModeReport("text");
  EXPECT_NE(text.find("fix mode: 2 forks made safe: 8.0 KiB copied for the children (anonymous), "
                      "4.0 MiB withheld from them\n  (hugetlb)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("note: action: 2 fixed; 2 children forked\n"), std::string::npos) << text;
  EXPECT_NE(text.find("2 forks (2 hazardous, 2 made safe)"), std::string::npos) << text;

  Json doc;
  std::string error;
  ASSERT_TRUE(ParseJson(FixModeReport("json"), &doc, &error)) << error;
  const Json& s = doc["summary"];
  EXPECT_EQ(s["forks"], 2);
  EXPECT_EQ(s["hazard_forks"], 2);
  EXPECT_EQ(s["fixed_forks"], 2);
  EXPECT_EQ(s["children_segv"], 0);
  EXPECT_EQ(s["made_safe"]["copied"]["bytes"], 8192);
  EXPECT_EQ(s["made_safe"]["copied"]["ranges"], 2);
  EXPECT_EQ(s["made_safe"]["copied"]["kinds"], Json::array({"anonymous"}));
  EXPECT_EQ(s["made_safe"]["withheld"]["bytes"], 4194304);
  EXPECT_EQ(s["made_safe"]["withheld"]["kinds"], Json::array({"hugetlb"}));
  EXPECT_EQ(s["made_safe"]["failed_ranges"], 0);
  ASSERT_EQ(doc["findings"].size(), 1u);
  EXPECT_EQ(doc["findings"][0]["made_safe"], s["made_safe"]);
  EXPECT_EQ(doc["findings"][0]["actions"]["fixed"], 2);
  EXPECT_EQ(doc["processes"][0]["fixed_forks"], 2);
  ASSERT_EQ(doc["forks"].size(), 2u);
  for (const Json& f : doc["forks"]) EXPECT_EQ(f["action"], "fixed");

  std::string md = FixModeReport("markdown");
  EXPECT_NE(md.find("\nfix mode: 2 forks made safe: 8.0 KiB copied"), std::string::npos) << md;
  EXPECT_NE(md.find("- **fix mode**: 2 forks made safe"), std::string::npos) << md;
}

// The HTML page draws a fixed fork as a mark of its own (a hazard made safe, not a harmful one)
// and shows the count as a card; the trace names it and does not colour it as harm; SARIF
// tells the finding's fixed forks.
TEST(ReportFormats, FixedForksInHtmlTraceAndSarif) {
  std::string html = FixModeReport("html");
  const std::string open = "<script type=\"application/json\" id=\"fg-data\">";
  size_t a = html.find(open);
  ASSERT_NE(a, std::string::npos);
  a += open.size();
  size_t b = html.find("</script>", a);
  ASSERT_NE(b, std::string::npos);
  Json data;
  std::string error;
  ASSERT_TRUE(ParseJson(html.substr(a, b - a), &data, &error)) << error;
  EXPECT_EQ(data["summary"]["fixed_forks"], 2);
  int fixed_marks = 0, harm_marks = 0;
  for (const Json& marks : data["M"])
    for (const Json& m : marks) {
      fixed_marks += m[0] == "f";
      harm_marks += m[0] == "h";
    }
  EXPECT_EQ(fixed_marks, 2);
  EXPECT_EQ(harm_marks, 0);
  EXPECT_NE(data["findings"][0]["made_safe"].get<std::string>().find("2 forks made safe"),
            std::string::npos);
  EXPECT_NE(html.find("forks made safe (fix mode)"), std::string::npos);

  Json trace;
  ASSERT_TRUE(ParseJson(FixModeReport("trace"), &trace, &error)) << error;
  EXPECT_EQ(trace["otherData"]["fixed_forks"], 2);
  int fixed_events = 0;
  for (const Json& e : trace["traceEvents"]) {
    if (e.value("name", "") != "fork (hazard, made safe)") continue;
    ++fixed_events;
    EXPECT_EQ(e["cname"], "good");
    EXPECT_EQ(e["args"]["action"], "fixed");
  }
  EXPECT_EQ(fixed_events, 2);

  Json sarif;
  ASSERT_TRUE(ParseJson(FixModeReport("sarif"), &sarif, &error)) << error;
  EXPECT_EQ(sarif["runs"][0]["results"][0]["properties"]["fixedForks"], 2);
}

// Without a fixed fork in the input nothing of fix mode appears: the reports of before stay
// byte for byte what they were.
TEST(ReportFormats, NoFixedForkNoFixModeWords) {
  Logs l = Read(kHostileLog);
  for (const std::string& out : {RenderText(l.report), RenderMarkdown(l.report),
                                 RenderJson(l.report), RenderSarif(l.report, "0")}) {
    EXPECT_EQ(out.find("made safe"), std::string::npos) << out;
    EXPECT_EQ(out.find("made_safe"), std::string::npos) << out;
    EXPECT_EQ(out.find("fixed"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace forkguard::cli
