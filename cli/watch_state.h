// What a running `forkguard watch` tells the rest of the node: /run/forkguard/watch.state,
// a JSON file root writes (0644, renamed into place) when what it knows changes and removes
// when it stops. `forkguard ps` reads it: which processes the watcher has judged, and how.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "cli/json.h"

namespace forkguard::cli {

inline constexpr char kWatchStateDir[] = "/run/forkguard";
inline constexpr char kWatchStateFile[] = "watch.state";

struct WatchState {
  struct Proc {
    int64_t forks = 0;
    int64_t refused = 0;
    std::string last;  // the last fork's verdict, "hazard (child-segv, inherited-rdma)"
  };
  int64_t pid = 0;
  std::string enforce;  // off, memory, all
  std::string hook;
  std::string log;
  int64_t lost = 0;
  std::map<int64_t, Proc> processes;  // by pid: the processes the watcher has judged a fork of
};

// Writes `s` to DIR/watch.state (DIR made 0755 if missing; a temporary file renamed into
// place, no symbolic link followed); false with *error.
// `s` as JSON: what the state file holds but its `schema`, and what `forkguard ps --format
// json` says of the watcher.
Json WatchStateJson(const WatchState& s);

bool WriteWatchState(const WatchState& s, const std::string& dir, std::string* error);
void RemoveWatchState(const std::string& dir);

// The state of a watcher that is running: the file owned by root, writable by no one else,
// and its pid alive. nullopt otherwise.
std::optional<WatchState> ReadWatchState(const std::string& dir = kWatchStateDir);

}  // namespace forkguard::cli
