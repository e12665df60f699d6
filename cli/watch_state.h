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
// Where `forkguard watch --persist` pins its links (bpffs): the kernel keeps them, and with them
// the programs and their maps, until they are unlinked (`forkguard watch --unpin`).
inline constexpr char kWatchPinDir[] = "/sys/fs/bpf/forkguard-watch";
// Beside the state file: what the watcher that pinned its links was doing (enforce, hook), for
// when none runs. bpffs is root's only (0700), so `forkguard ps` as another user learns of the
// pins from this file.
inline constexpr char kWatchPinnedFile[] = "watch.pinned";

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

// Programs an earlier `forkguard watch --persist` left pinned: they go on judging forks (and,
// with enforce memory or all, refusing them) while no watcher runs, and nothing reads their
// records.
struct PinnedWatch {
  int64_t links = -1;   // pinned links in kWatchPinDir; -1: the directory is not readable
  std::string enforce;  // as the watcher that pinned them recorded it; "" when unknown
  std::string hook;
};

// Records the pinning watcher's enforce level and hook in DIR/watch.pinned, as
// WriteWatchState writes; false with *error.
bool WritePinnedWatch(const std::string& enforce, const std::string& hook, const std::string& dir,
                      std::string* error);
void RemovePinnedWatch(const std::string& dir);

// How many links are pinned in `pin_dir` (0 when it does not exist), or -1 when it cannot be
// read.
int64_t CountPinnedLinks(const std::string& pin_dir = kWatchPinDir);

// The pinned programs, when there are: links in `pin_dir`, or (when it cannot be read) a
// trusted DIR/watch.pinned. nullopt when nothing is pinned.
std::optional<PinnedWatch> ReadPinnedWatch(const std::string& dir = kWatchStateDir,
                                           const std::string& pin_dir = kWatchPinDir);

// The state of a watcher that is running: the file owned by root, writable by no one else,
// and its pid alive. nullopt otherwise.
std::optional<WatchState> ReadWatchState(const std::string& dir = kWatchStateDir);

}  // namespace forkguard::cli
