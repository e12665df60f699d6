// transport_tool's command line: one table of option rows per role (flags/: name, value,
// default, help), and the --help text made from them.
#pragma once

#include <string>

#include "flags/flags.h"
#include "rdma/transport.h"

namespace forkguard::rdma::transport_tool {

// What a run does when an option is not given: TransportOptions' defaults and the tool's own.
struct Defaults {
  uint64_t count = 1000;
  std::string size = "mixed";
  uint64_t seed = 1;
};

// --size, --seed, --idle-timeout-ms and --heartbeat-ms are in both roles' tables.
inline flags::FlagTable SendFlags() {
  const Defaults d;
  const TransportOptions t;
  return {
      {"listen", "IP:PORT", "", "the address to listen on (required)"},
      {"count", "N", std::to_string(d.count), "batches to send, 0 = until killed"},
      {"size", "B|mixed", d.size, "batch size (K/M/G), or mixed: MixedBatchSize(seed, seq)"},
      {"seed", "S", std::to_string(d.seed), "contents FillPattern(seed, seq)"},
      {"no-checksum", "", "", "do not CRC32C the batches"},
      {"ready-fd", "FD", "-1", "write one byte to FD once listening, -1: none"},
      {"idle-timeout-ms", "MS", std::to_string(t.idle_timeout_ms),
       "no progress at all for this long is an error"},
      {"heartbeat-ms", "MS", std::to_string(t.heartbeat_ms),
       "idle side probes the link this often"},
      flags::HelpFlag(),
  };
}

inline flags::FlagTable RecvFlags() {
  const TransportOptions t;
  flags::FlagTable send = SendFlags();
  auto row = [&](const char* name) {
    for (const flags::Flag& f : send)
      if (f.name == name) return f;
    return flags::Flag{};
  };
  return {
      {"connect", "IP:PORT", "", "the sender's address (required)"},
      {"bind", "IP", "", "source address (the device to use)"},
      flags::Retold(row("size"), "what the sender sends, for --verify"),
      flags::Retold(row("seed"), "what the sender sends, for --verify"),
      {"verify", "", "", "check every byte of every batch"},
      {"slots", "N", std::to_string(t.slots), "receive slots advertised to the sender"},
      {"slot-bytes", "B", std::to_string(t.slot_bytes), "bytes per receive slot, K/M/G"},
      row("idle-timeout-ms"),
      row("heartbeat-ms"),
      flags::HelpFlag(),
  };
}

// `transport_tool --help`.
inline std::string Help() {
  return "transport_tool - one end of an RDMA batch stream, for the real-device tests (which run "
         "the\nother end in-process) and bench/transport.sh.\n"
         "\n"
         "Usage:\n"
         "  transport_tool send --listen IP:PORT [options]\n" +
         flags::ColumnHelp(SendFlags(), 6, 27) +
         "  transport_tool recv --connect IP:PORT [options]\n" +
         flags::ColumnHelp(RecvFlags(), 6, 27) +
         "  transport_tool --help    this text\n"
         "\n"
         "Each end prints one summary line \"<role>: N batches, B bytes, T s, X MB/s\" and exits "
         "0,\nor prints the transport error and exits 1; a bad command line exits 2.\n";
}

}  // namespace forkguard::rdma::transport_tool
