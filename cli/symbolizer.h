// Offline symbolization of native frames ({"obj","off"}) to function and
// file:line with elfutils libdwfl, done by `forkguard report` so the shim only
// has to capture raw addresses.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/event_log.h"

namespace forkguard::cli {

// C++ symbol names demangled; anything else returned as is.
std::string Demangle(const std::string& name);

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Fills frame->func/src_file/src_line when obj is present on this machine
  // and has symbols (and debug info, for file:line). Never fails loudly:
  // a missing object or stripped library just leaves the frame as it was.
  void Symbolize(Frame* frame);
  void Symbolize(Stack* stack) {
    for (auto& f : *stack) Symbolize(&f);
  }

  // Objects whose frames stayed raw offsets because the file a /2 log names (with its
  // build-id) is missing here or has another build-id: one note per object, then cleared.
  std::vector<Note> TakeNotes();

 private:
  struct Module;
  Module* Load(const std::string& obj);
  void NoteOnce(const std::string& obj, const std::string& text);
  std::map<std::string, std::unique_ptr<Module>> modules_;
  std::map<std::string, bool> noted_;
  std::vector<Note> notes_;
};

}  // namespace forkguard::cli
