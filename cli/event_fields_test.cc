// Tolerant lookups in a line (cli/event_fields.h): addresses as the logs write them.
#include "cli/event_fields.h"
#include "cli/json.h"
#include "gtest/gtest.h"

namespace forkguard::cli {
namespace {

TEST(Json, AddressesParse) {
  Json s = Json("0x7f12");
  EXPECT_EQ(ParseAddress(&s), 0x7f12u);
  Json bad = Json("0x");
  EXPECT_FALSE(ParseAddress(&bad));
  Json big = Json("0x1ffffffffffffffff");
  EXPECT_FALSE(ParseAddress(&big));
}

}  // namespace
}  // namespace forkguard::cli
