// Events as self-contained objects, from the product's reader's lines.
#include "tests/support/event_records.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/log_lines.h"
#include "formats/event_schema.h"

namespace forkguard::test_support {
namespace {

using cli::Fields;
using cli::FileNotes;
using cli::FindMember;
using cli::Frame;
using cli::Json;
using cli::LineSink;
using cli::LogSet;
using cli::Note;
using cli::ParseJson;
using cli::Stack;
using cli::V2Decoder;
using schema::EventType;

// "0x1a2b".
std::string HexText(uint64_t v) {
  char b[24];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

Json FrameJson(const Frame& f) {
  Json o = Json::object();
  if (f.python) {
    Json py = Json::object();
    py.emplace(schema::kKeyFile, Json(f.py_file));
    py.emplace(schema::kKeyLine, Json(f.py_line));
    py.emplace(schema::kKeyFunc, Json(f.py_func));
    o.emplace(schema::kKeyPy, std::move(py));
    return o;
  }
  if (!f.off) {  // a raw address
    o.emplace(schema::kKeyIp, Json(HexText(f.ip)));
    return o;
  }
  o.emplace(schema::kKeyIp, Json(HexText(f.base + *f.off)));
  o.emplace(schema::kKeyObj, Json(f.obj));
  o.emplace(schema::kKeyOff, Json(HexText(*f.off)));
  const std::string& name = f.func.empty() ? f.sym : f.func;
  if (!name.empty()) o.emplace(schema::kKeySym, Json(name));
  return o;
}

// Writes the events V2Decoder and ParseLine yield as self-contained objects
// (DecodeEventRecords).
struct RecordSink final : LineSink {
  V2Decoder v2;
  const std::function<void(Stack*)>* symbolize;
  std::vector<EventRecord>* out;
  Json header = Json::object();  // the members of the /2 header every event carries

  RecordSink(const std::function<void(Stack*)>* s, std::vector<EventRecord>* o)
      : LineSink(&v2), symbolize(s), out(o) {}

  void Header(const Fields& /*v*/, std::string_view line, int64_t /*pid*/,
              int /*lineno*/) override {
    Json h;
    ParseJson(line, &h, nullptr);  // simdjson read it already
    header = Json::object();
    for (const auto& [key, value] : h.items())
      if (key != schema::kKeySchema && key != schema::kKeyEvent && key != schema::kKeyStartNs)
        header.emplace(key, Json(value));
  }
  void Record(EventType /*kind*/, int64_t /*id*/) override {}
  void EventV1(const Fields& /*v*/, std::string_view line, std::string_view /*type*/,
               int64_t /*pid*/, int lineno, FileNotes* /*notes*/) override {
    EventRecord& r = out->emplace_back();
    r.line = lineno;
    ParseJson(line, &r.json, nullptr);
  }

  // A stack member: the frames of the record its id names (inline frames as they are).
  Json StackValue(const Json& v, int lineno, FileNotes* notes) const {
    if (!v.is_number_integer()) return v;
    std::optional<Stack> frames = v2.Frames(v.get<int64_t>(), lineno, notes);
    if (!frames) {
      notes->Add(lineno, "stack id used before or without its record",
                 "stack " + std::to_string(v.get<int64_t>()));
      return Json::array();
    }
    if (*symbolize) (*symbolize)(&*frames);
    Json a = Json::array();
    for (const Frame& f : *frames) a.push_back(FrameJson(f));
    return a;
  }
  // An object whose "stack" member is resolved.
  Json WithStack(const Json& o, int lineno, FileNotes* notes) const {
    if (!o.is_object()) return o;
    Json r = Json::object();
    for (const auto& [key, value] : o.items())
      r.emplace(key, key == schema::kKeyStack ? StackValue(value, lineno, notes) : Json(value));
    return r;
  }

  void EventV2(const Fields& /*v*/, std::string_view line, std::string_view type, EventType kind,
               int64_t ts, int lineno, FileNotes* notes) override {
    Json in;
    ParseJson(line, &in, nullptr);  // simdjson read it already
    EventRecord& r = out->emplace_back();
    r.line = lineno;
    Json& e = r.json;
    e = Json::object();
    e.emplace(schema::kKeySchema, Json(std::string(schema::kEventV2)));
    e.emplace(schema::kKeyEvent, Json(std::string(type)));
    for (const auto& [key, value] : header.items()) e.emplace(key, Json(value));
    e.emplace(schema::kKeyTsNs, Json(ts));
    for (const auto& [key, value] : in.items()) {
      if (key == schema::kKeyEvent || key == schema::kKeyTs) continue;
      if (key == schema::kKeyStack || key == schema::kKeyRegStack) {
        e.emplace(key, StackValue(value, lineno, notes));
      } else if (key == schema::kKeyInit) {
        e.emplace(key, WithStack(value, lineno, notes));
      } else if (key == schema::kKeySites && kind == EventType::kMrCounts && value.is_array()) {
        Json sites = Json::array();
        for (const Json& site : value) sites.push_back(WithStack(site, lineno, notes));
        e.emplace(key, std::move(sites));
      } else if (key == schema::kKeyMr && value.is_array()) {  // [addr, len, access, handle]
        int64_t f[4] = {0, 0, 0, 0};
        for (size_t i = 0; i < 4 && i < value.size(); ++i)
          f[i] = value[i].is_number_integer() ? value[i].get<int64_t>() : 0;
        e.emplace(schema::kKeyAddr, Json(f[0]));
        e.emplace(schema::kKeyLen, Json(f[1]));
        e.emplace(schema::kKeyAccess, Json(f[2]));
        e.emplace(schema::kKeyHandle, Json(HexText(static_cast<uint64_t>(f[3]))));
      } else {
        e.emplace(key, Json(value));
      }
    }
    if (!FindMember(e, schema::kKeyTid)) e.emplace(schema::kKeyTid, Json(v2.pid));
    if (kind == EventType::kMrRegister) {
      if (!FindMember(e, schema::kKeyCall))
        e.emplace(schema::kKeyCall, Json(schema::kDefaultRegCall));
      if (!FindMember(e, schema::kKeyDontfork)) e.emplace(schema::kKeyDontfork, Json());
    }
  }
};
}  // namespace

std::vector<EventRecord> DecodeEventRecords(std::string_view file_name, std::string_view text,
                                            const std::function<void(Stack*)>& symbolize,
                                            std::vector<Note>* notes) {
  std::vector<EventRecord> records;
  LogSet skipped;
  {
    FileNotes file_notes(file_name, &skipped);
    RecordSink sink(&symbolize, &records);
    cli::ParseText(text, &file_notes, &sink);
  }
  for (Note& n : skipped.notes) notes->push_back(std::move(n));
  return records;
}

}  // namespace forkguard::test_support
