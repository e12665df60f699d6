// The CLI's JSON (cli/json.h): strict parsing, and writing any string as valid JSON.
#include <string>

#include "cli/json.h"
#include "gtest/gtest.h"

namespace forkguard::cli {
namespace {

TEST(Json, ParsesAndRejects) {
  Json v;
  std::string err;
  ASSERT_TRUE(ParseJson(R"({"a":[1,-2.5e3,"\u00e9\ud83d\ude00",true,null],"b":{}})", &v, &err));
  EXPECT_EQ((*FindMember(v, "a"))[1].get<double>(), -2500);
  EXPECT_EQ((*FindMember(v, "a"))[2].get_ref<const std::string&>(), "\xc3\xa9\xf0\x9f\x98\x80");
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "tru", "\"\x01\"", "{} x", "\"\\x\"", "-", "1e"})
    EXPECT_FALSE(ParseJson(bad, &v, &err)) << bad;
  EXPECT_EQ(JsonQuote("a\"b\\\n\xff"), "\"a\\\"b\\\\\\u000a\\ufffd\"");
}

// Strings that are not UTF-8 (a log file's name, a name in a log) are written as valid JSON:
// each byte of an invalid sequence (overlong, surrogate, past U+10FFFF, cut short) as U+FFFD.
TEST(Json, InvalidUtf8IsWrittenAsReplacementCharacters) {
  for (std::string bad : {"\xff", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xe2\x82",
                          "\xf5\x80\x80", "ok \xce\xbb"}) {
    std::string text = WriteJson(Json(bad), -1);
    Json back;
    std::string err;
    EXPECT_TRUE(ParseJson(text, &back, &err)) << text << ": " << err;
  }
  EXPECT_EQ(WriteJson(Json("\xed\xa0\x80"), -1), "\"\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(WriteJson(Json("\xce\xbb"), -1), "\"\xce\xbb\"");
}

}  // namespace
}  // namespace forkguard::cli
