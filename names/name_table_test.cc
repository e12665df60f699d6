#include "names/name_table.h"

#include <strings.h>

#include <gtest/gtest.h>

namespace forkguard {
namespace {

enum class Color : unsigned char { kRed, kGreen, kBlue };
constexpr char kColorNames[][6] = {"red", "green", "blue"};
static_assert(sizeof(kColorNames) / sizeof(kColorNames[0]) == CountThrough(Color::kBlue));

enum Bit : unsigned { kLow = 1u << 0, kMid = 1u << 1, kHigh = 1u << 2 };
constexpr char kBitNames[][5] = {"low", "mid", "high"};

TEST(NameTable, NameOfIndexesByValue) {
  EXPECT_STREQ(NameOf(kColorNames, Color::kRed, "?"), "red");
  EXPECT_STREQ(NameOf(kColorNames, Color::kBlue, "?"), "blue");
  EXPECT_STREQ(NameOf(kColorNames, static_cast<Color>(3), "?"), "?");
  EXPECT_STREQ(NameOf(kColorNames, -1, "?"), "?");
  static_assert(NameOf(kColorNames, Color::kGreen, "?")[0] == 'g');
}

TEST(NameTable, FlagNameIndexesByBit) {
  EXPECT_STREQ(FlagName(kBitNames, kLow, "?"), "low");
  EXPECT_STREQ(FlagName(kBitNames, kHigh, "?"), "high");
  EXPECT_STREQ(FlagName(kBitNames, static_cast<Bit>(0), "?"), "?");
  EXPECT_STREQ(FlagName(kBitNames, static_cast<Bit>(kLow | kMid), "?"), "?");
  EXPECT_STREQ(FlagName(kBitNames, static_cast<Bit>(1u << 3), "?"), "?");
}

TEST(NameTable, ValueOfFindsTheName) {
  Color c = Color::kRed;
  EXPECT_TRUE(ValueOf(kColorNames, "blue", &c));
  EXPECT_EQ(c, Color::kBlue);
  EXPECT_FALSE(ValueOf(kColorNames, "BLUE", &c));
  EXPECT_FALSE(ValueOf(kColorNames, "purple", &c));
  EXPECT_FALSE(ValueOf(kColorNames, "", &c));
  EXPECT_FALSE(ValueOf(kColorNames, nullptr, &c));
  EXPECT_EQ(c, Color::kBlue);  // untouched by a miss
  EXPECT_TRUE(ValueOf<strcasecmp>(kColorNames, "GREEN", &c));
  EXPECT_EQ(c, Color::kGreen);
}

}  // namespace
}  // namespace forkguard
