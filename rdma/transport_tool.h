// transport_tool's command line: one long_opts[] table per role and the --help text that
// documents them (transport_tool_cli_test keeps the two in step).
#pragma once

#include <getopt.h>

namespace forkguard::rdma::transport_tool {

// `transport_tool --help` prints these in order; each role's section documents its table.
inline constexpr char kHelpHeader[] =
    "transport_tool - one end of an RDMA batch stream, for the real-device tests (which run the\n"
    "other end in-process) and bench/transport.sh.\n"
    "\n"
    "Usage:\n";
inline constexpr char kSendHelp[] =
    "  transport_tool send --listen IP:PORT [options]\n"
    "      --count N            batches to send, 0 = until killed (default 1000)\n"
    "      --size B|mixed       batch size (K/M/G), or mixed: MixedBatchSize(seed, seq) (default)\n"
    "      --seed S             contents FillPattern(seed, seq) (default 1)\n"
    "      --no-checksum        do not CRC32C the batches\n"
    "      --ready-fd FD        write one byte to FD once listening\n";
inline constexpr char kRecvHelp[] =
    "  transport_tool recv --connect IP:PORT [options]\n"
    "      --bind IP            source address (the device to use)\n"
    "      --size B|mixed       --seed S   what the sender sends, for --verify\n"
    "      --verify             check every byte of every batch\n"
    "      --slots N            receive slots advertised to the sender (default 8)\n"
    "      --slot-bytes B       bytes per receive slot, K/M/G (default 4M)\n";
inline constexpr char kBothHelp[] =
    "  both: --idle-timeout-ms MS   --heartbeat-ms MS   (TransportOptions, transport.h)\n";
inline constexpr char kHelpFooter[] =
    "  transport_tool --help    this text\n"
    "\n"
    "Each end prints one summary line \"<role>: N batches, B bytes, T s, X MB/s\" and exits 0,\n"
    "or prints the transport error and exits 1; a bad command line exits 2.\n";

// --idle-timeout-ms and --heartbeat-ms are in both tables (TransportOptions of either end).
inline constexpr option kSendOpts[] = {
    {"listen", required_argument, nullptr, 0},
    {"count", required_argument, nullptr, 0},
    {"size", required_argument, nullptr, 0},
    {"seed", required_argument, nullptr, 0},
    {"no-checksum", no_argument, nullptr, 0},
    {"ready-fd", required_argument, nullptr, 0},
    {"idle-timeout-ms", required_argument, nullptr, 0},
    {"heartbeat-ms", required_argument, nullptr, 0},
    {"help", no_argument, nullptr, 0},
    {},
};

inline constexpr option kRecvOpts[] = {
    {"connect", required_argument, nullptr, 0},
    {"bind", required_argument, nullptr, 0},
    {"size", required_argument, nullptr, 0},
    {"seed", required_argument, nullptr, 0},
    {"verify", no_argument, nullptr, 0},
    {"slots", required_argument, nullptr, 0},
    {"slot-bytes", required_argument, nullptr, 0},
    {"idle-timeout-ms", required_argument, nullptr, 0},
    {"heartbeat-ms", required_argument, nullptr, 0},
    {"help", no_argument, nullptr, 0},
    {},
};

}  // namespace forkguard::rdma::transport_tool
