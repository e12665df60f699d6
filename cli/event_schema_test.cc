// formats/event_schema.h against docs/event-schema.json: the same records, each with the same
// keys, the same keys in the objects inside them, no name in the header's lists that
// neither the JSON Schema nor a list uses, and the same values in each value set.
#include "formats/event_schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "cli/json.h"
#include "tests/support/runfiles.h"

namespace forkguard {
namespace {

using cli::FindMember;
using cli::Json;
using Names = std::set<std::string>;

// The header's lists, as names.
Names HeaderTypes() {
  return Names(std::begin(schema::kEventTypeNames), std::end(schema::kEventTypeNames));
}
std::map<std::string, Names> HeaderRecordKeys() {
  std::map<std::string, Names> out;
#define FORKGUARD_X(type, key) out[schema::k##type].insert(schema::kKey##key);
  FORKGUARD_RECORD_KEYS(FORKGUARD_X)
#undef FORKGUARD_X
  return out;
}
Names HeaderLineKeys() {
  Names out;
#define FORKGUARD_X(key) out.insert(schema::kKey##key);
  FORKGUARD_LINE_KEYS(FORKGUARD_X)
#undef FORKGUARD_X
  return out;
}
std::map<std::string, Names> HeaderObjectKeys() {
  std::map<std::string, Names> out;
#define FORKGUARD_X(member, key) out[schema::kKey##member].insert(schema::kKey##key);
  FORKGUARD_OBJECT_KEYS(FORKGUARD_X)
#undef FORKGUARD_X
  return out;
}

const Json& At(const Json& v, std::initializer_list<const char*> path) {
  static const Json kNull;
  const Json* p = &v;
  for (const char* k : path) {
    p = FindMember(*p, k);
    if (p == nullptr) return kNull;
  }
  return *p;
}

Names PropertyNames(const Json& v) {
  Names out;
  const Json* props = FindMember(v, "properties");
  if (props == nullptr) return out;
  for (const auto& [name, value] : props->items()) out.insert(name);
  return out;
}

class EventSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(forkguard::test_support::Runfile("docs/event-schema.json"));
    std::stringstream text;
    text << in.rdbuf();
    std::string error;
    ASSERT_TRUE(cli::ParseJson(text.str(), &doc_, &error)) << error;
    defs_ = &At(doc_, {"$defs"});
    ASSERT_TRUE(defs_->is_object());
  }
  // The `then` of each `event` case of a $defs line: event name -> its schema.
  std::map<std::string, const Json*> Cases(const char* def) const {
    std::map<std::string, const Json*> out;
    for (const Json& c : At(*defs_, {def, "allOf"})) {
      std::string name =
          At(c, {"if", "properties", "event", "const"}).get_ref<const std::string&>();
      EXPECT_FALSE(name.empty()) << def;
      out[name] = FindMember(c, "then");
    }
    return out;
  }
  Json doc_;
  const Json* defs_ = nullptr;
};

TEST_F(EventSchemaTest, SameRecords) {
  Names docs = {schema::kHeader};
  for (const auto& [name, then] : Cases("v2_line")) docs.insert(name);
  EXPECT_EQ(HeaderTypes(), docs);
  // /1 had no records of their own and fewer events: all of them are names of the header.
  for (const auto& [name, then] : Cases("v1_line")) EXPECT_TRUE(HeaderTypes().count(name)) << name;
}

TEST_F(EventSchemaTest, SameKeysPerRecord) {
  std::map<std::string, Names> header = HeaderRecordKeys();
  EXPECT_EQ(header[schema::kHeader], PropertyNames(At(*defs_, {"v2_header"})));
  for (const auto& [name, then] : Cases("v2_line")) {
    ASSERT_NE(then, nullptr) << name;
    EXPECT_EQ(header[name], PropertyNames(*then)) << "event " << name;
  }
  EXPECT_EQ(HeaderLineKeys(), PropertyNames(At(*defs_, {"v2_line"})));
}

TEST_F(EventSchemaTest, SameKeysInObjects) {
  std::map<std::string, Names> header = HeaderObjectKeys();
  std::map<std::string, const Json*> v2 = Cases("v2_line");
  const Json& fork = *v2.at(schema::kFork);
  EXPECT_EQ(header[schema::kKeyInit],
            PropertyNames(At(fork, {"properties", "init", "anyOf"}).at(1)));
  EXPECT_EQ(header[schema::kKeyRanges], PropertyNames(At(fork, {"properties", "ranges", "items"})));
  EXPECT_EQ(header[schema::kKeyLive], PropertyNames(At(fork, {"properties", "live"})));
  EXPECT_EQ(header[schema::kKeyForkSupport],
            PropertyNames(At(fork, {"properties", "fork_support"})));
  EXPECT_EQ(header[schema::kKeySites],
            PropertyNames(At(*v2.at(schema::kMrCounts), {"properties", "sites", "items"})));
  EXPECT_EQ(header[schema::kKeyRange],
            PropertyNames(At(*v2.at(schema::kChildSegv), {"properties", "range"})));
  Names frame = PropertyNames(At(*defs_, {"native_frame"}));
  for (const std::string& k : PropertyNames(At(*defs_, {"python_frame"}))) frame.insert(k);
  EXPECT_EQ(header[schema::kKeyFrames], frame);
  EXPECT_EQ(header[schema::kKeyPy],
            PropertyNames(At(*defs_, {"python_frame", "properties", "py"})));
}

// Every key of the header is a key some list places, and every key the JSON Schema names
// (in /1 too) is one of the header's.
TEST_F(EventSchemaTest, EveryKeyPlacedAndKnown) {
  Names placed = HeaderLineKeys();
  for (const auto& [type, keys] : HeaderRecordKeys()) placed.insert(keys.begin(), keys.end());
  for (const auto& [member, keys] : HeaderObjectKeys()) placed.insert(keys.begin(), keys.end());
  // /1 only (read, no longer written): every line's ts_ns, mr_register's access.
  placed.insert({schema::kKeyTsNs, schema::kKeyAccess});
  Names all(std::begin(schema::kKeyNames), std::end(schema::kKeyNames));
  EXPECT_EQ(all, placed);
  EXPECT_EQ(all.size(), std::size(schema::kKeyNames)) << "a key named twice";
  Names v1 = PropertyNames(At(*defs_, {"v1_line"}));
  for (const auto& [name, then] : Cases("v1_line")) {
    for (const std::string& k : PropertyNames(*then)) v1.insert(k);
  }
  for (const std::string& k : v1) EXPECT_TRUE(all.count(k)) << "/1 key " << k;
}

// Names of a list as a set: the values the header's lists give a value set.
template <size_t N>
Names NamesOf(const char* const (&names)[N]) {
  return Names(std::begin(names), std::end(names));
}

// The enum of property `key` of `then` (or of its array's items).
Names EnumOf(const Json& then, const char* key) {
  Names out;
  const Json& p = At(then, {"properties", key});
  const Json* e = FindMember(p, "enum");
  if (e == nullptr) e = FindMember(At(p, {"items"}), "enum");
  if (e != nullptr)
    for (const Json& v : *e) out.insert(v.get_ref<const std::string&>());
  return out;
}

// Every value set of the fork event: the header's table against the JSON Schema's enum, in
// /2 and (what it had of them) in /1.
TEST_F(EventSchemaTest, SameValues) {
  const Json& fork = *Cases("v2_line").at(schema::kFork);
  EXPECT_EQ(NamesOf(schema::kVerdictNames), EnumOf(fork, schema::kKeyVerdict));
  EXPECT_EQ(NamesOf(schema::kReasonNames), EnumOf(fork, schema::kKeyReasons));
  EXPECT_EQ(NamesOf(schema::kActionNames), EnumOf(fork, schema::kKeyAction));
  Names modes = NamesOf(schema::kModeNames);
  modes.insert(schema::kModeWatch);
  EXPECT_EQ(modes, EnumOf(*Cases("v2_line").at(schema::kProcessStart), schema::kKeyMode));
  Names via = NamesOf(schema::kViaNames);
  via.insert(schema::kViaBackstop);
  Names v2_via = via;
  v2_via.insert(schema::kViaKernel);
  EXPECT_EQ(v2_via, EnumOf(fork, schema::kKeyVia));
  EXPECT_EQ(NamesOf(schema::kFixedNames),
            EnumOf(At(fork, {"properties", "ranges", "items"}), schema::kKeyFixed));
  // /1 (read, no longer written): the same values but fix mode's and the watcher's, which
  // came with /2.
  const Json& v1 = *Cases("v1_line").at(schema::kFork);
  EXPECT_EQ(NamesOf(schema::kVerdictNames), EnumOf(v1, schema::kKeyVerdict));
  EXPECT_EQ(NamesOf(schema::kReasonNames), EnumOf(v1, schema::kKeyReasons));
  Names v1_actions = NamesOf(schema::kActionNames);
  v1_actions.erase(schema::kActionFixed);
  v1_actions.erase(schema::kActionRefused);
  EXPECT_EQ(v1_actions, EnumOf(v1, schema::kKeyAction));
  EXPECT_EQ(via, EnumOf(v1, schema::kKeyVia));
}

}  // namespace
}  // namespace forkguard
