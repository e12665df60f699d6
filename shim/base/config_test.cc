#include "shim/base/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace forkguard {
namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  std::vector<std::string> warnings;
};

const char* Lookup(const char* name, void* ctx) {
  auto* env = static_cast<FakeEnv*>(ctx);
  auto it = env->vars.find(name);
  return it == env->vars.end() ? nullptr : it->second.c_str();
}

void Collect(const char* line, void* ctx) { static_cast<FakeEnv*>(ctx)->warnings.push_back(line); }

Config Parse(FakeEnv& env, bool secure = false) {
  return ParseConfig(Lookup, &env, Collect, &env, secure);
}

// The settings of FORKGUARD_MODE, _REPORT, _QUIET, _STACK_DEPTH and _LOG in `c`.
void ExpectSettings(const Config& c, Mode mode, ReportPolicy report, bool quiet, int stack_depth,
                    const char* log_dir) {
  EXPECT_EQ(c.mode, mode);
  EXPECT_EQ(c.report, report);
  EXPECT_EQ(c.quiet, quiet);
  EXPECT_EQ(c.stack_depth, stack_depth);
  EXPECT_STREQ(c.log_dir, log_dir);
}

TEST(ConfigTest, DefaultsWithEmptyEnvironment) {
  FakeEnv env;
  Config c = Parse(env);
  ExpectSettings(c, Mode::kWarn, ReportPolicy::kOnce, false, 32, "");
  EXPECT_EQ(c.allow_count, 0);
  EXPECT_TRUE(env.warnings.empty());
}

TEST(ConfigTest, ParsesEveryVariable) {
  FakeEnv env;
  env.vars = {{"FORKGUARD_MODE", "error"},
              {"FORKGUARD_REPORT", "always"},
              {"FORKGUARD_QUIET", "1"},
              {"FORKGUARD_STACK_DEPTH", "8"},
              {"FORKGUARD_LOG", "/tmp/logs"},
              {"FORKGUARD_ALLOW", "libgloo, my_worker ,,x"},
              {"FORKGUARD_SUPPRESSIONS", "/etc/fg.supp"}};
  Config c = Parse(env);
  EXPECT_STREQ(c.suppressions, "/etc/fg.supp");
  ExpectSettings(c, Mode::kError, ReportPolicy::kAlways, true, 8, "/tmp/logs");
  ASSERT_EQ(c.allow_count, 3);
  EXPECT_STREQ(c.allow[0], "libgloo");
  EXPECT_STREQ(c.allow[1], "my_worker");
  EXPECT_STREQ(c.allow[2], "x");
  EXPECT_TRUE(env.warnings.empty());
}

TEST(ConfigTest, ModesAreCaseInsensitive) {
  for (auto [text, mode] : std::vector<std::pair<std::string, Mode>>{
           {"WARN", Mode::kWarn}, {"Abort", Mode::kAbort}, {"off", Mode::kOff}}) {
    FakeEnv env;
    env.vars["FORKGUARD_MODE"] = text;
    EXPECT_EQ(Parse(env).mode, mode) << text;
  }
}

TEST(ConfigTest, BadModeWarnsOnceAndUsesWarn) {
  FakeEnv env;
  env.vars["FORKGUARD_MODE"] = "explode";
  Config c = Parse(env);
  EXPECT_EQ(c.mode, Mode::kWarn);
  ASSERT_EQ(env.warnings.size(), 1u);
  EXPECT_EQ(env.warnings[0],
            "forkguard: ignoring FORKGUARD_MODE=explode: expected warn, error, abort, fix or off; "
            "using warn");
}

TEST(ConfigTest, BadValuesGetSafeDefaults) {
  FakeEnv env;
  env.vars = {{"FORKGUARD_REPORT", "sometimes"},
              {"FORKGUARD_QUIET", "maybe"},
              {"FORKGUARD_STACK_DEPTH", "12abc"},
              {"FORKGUARD_LOG", "relative/dir"},
              {"FORKGUARD_SUPPRESSIONS", "fg.supp"}};
  Config c = Parse(env);
  EXPECT_EQ(c.report, ReportPolicy::kOnce);
  EXPECT_FALSE(c.quiet);
  EXPECT_EQ(c.stack_depth, 32);
  EXPECT_STREQ(c.log_dir, "");
  EXPECT_STREQ(c.suppressions, "");
  ASSERT_EQ(env.warnings.size(), 5u);
  for (const std::string& w : env.warnings) {
    EXPECT_EQ(w.rfind("forkguard: ignoring FORKGUARD_", 0), 0u) << w;
    EXPECT_NE(w.find("; using "), std::string::npos) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
  }
}

TEST(ConfigTest, StackDepthBounds) {
  for (const char* bad : {"0", "-3", "65", "99999999999999999999", ""}) {
    FakeEnv env;
    env.vars["FORKGUARD_STACK_DEPTH"] = bad;
    EXPECT_EQ(Parse(env).stack_depth, 32) << bad;
    EXPECT_EQ(env.warnings.size(), 1u) << bad;
  }
  FakeEnv env;
  env.vars["FORKGUARD_STACK_DEPTH"] = "64";
  EXPECT_EQ(Parse(env).stack_depth, 64);
}

TEST(ConfigTest, LongValueIsCutInTheWarning) {
  FakeEnv env;
  env.vars["FORKGUARD_MODE"] = std::string(5000, 'x');
  Parse(env);
  ASSERT_EQ(env.warnings.size(), 1u);
  EXPECT_LT(env.warnings[0].size(), 300u);
  EXPECT_NE(env.warnings[0].find("..."), std::string::npos);
}

TEST(ConfigTest, ControlCharactersNeverSplitTheWarningLine) {
  FakeEnv env;
  env.vars["FORKGUARD_REPORT"] = "once\nforkguard: fake line\r\x1b[31m";
  Parse(env);
  ASSERT_EQ(env.warnings.size(), 1u);
  EXPECT_EQ(env.warnings[0].find('\n'), std::string::npos);
  EXPECT_EQ(env.warnings[0].find('\r'), std::string::npos);
  EXPECT_EQ(env.warnings[0].find('\x1b'), std::string::npos);
  EXPECT_NE(env.warnings[0].find("once?forkguard: fake line??[31m"), std::string::npos);
}

TEST(ConfigTest, TooManyAllowPatternsKeepsTheFirstSixteen) {
  FakeEnv env;
  std::string v;
  for (int i = 0; i < 20; ++i) v += "p" + std::to_string(i) + ",";
  env.vars["FORKGUARD_ALLOW"] = v;
  Config c = Parse(env);
  EXPECT_EQ(c.allow_count, 16);
  EXPECT_STREQ(c.allow[15], "p15");
  EXPECT_EQ(env.warnings.size(), 1u);
}

TEST(ConfigTest, SecureExecutionIgnoresTheEnvironment) {
  FakeEnv env;
  env.vars = {{"FORKGUARD_MODE", "off"}, {"FORKGUARD_LOG", "/tmp/x"}};
  Config c = Parse(env, /*secure=*/true);
  EXPECT_EQ(c.mode, Mode::kWarn);
  EXPECT_STREQ(c.log_dir, "");
  EXPECT_TRUE(env.warnings.empty());
}

TEST(ConfigTest, AllowPatternMatchesSubstrings) {
  EXPECT_TRUE(AllowPatternMatches("worker", "start_worker_pool"));
  EXPECT_TRUE(AllowPatternMatches("libgloo", "libgloo.so.0"));
  EXPECT_FALSE(AllowPatternMatches("gloo", "libnccl.so.2"));
  EXPECT_FALSE(AllowPatternMatches("", "anything"));
  EXPECT_FALSE(AllowPatternMatches("x", nullptr));
}

}  // namespace
}  // namespace forkguard
