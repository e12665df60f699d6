// forkguard.event/2: the names of the log's records, events and keys, in one place for the
// shim's writers (shim/event_log.cc, shim/event_writer.cc, shim/child.cc), the CLI's decoder
// (cli/event_log.cc) and the test job generator (cli/testdata/job_generator*). Plain constexpr
// strings: the shim uses them on its fork path, without libstdc++ allocation. What each one means:
// shim/EVENT_LOG.md; the shape as JSON Schema: docs/event-schema.json.
#pragma once

namespace forkguard::schema {

// The schema the shim writes, and the one the reader still reads.
inline constexpr const char kEventV2[] = "forkguard.event/2";
inline constexpr const char kEventV1[] = "forkguard.event/1";

// Records of a /2 file that are not events: the file's header (first line, the only one
// carrying `schema` and the process's identity), the module map and the stack table.
inline constexpr const char kHeader[] = "header";
inline constexpr const char kModule[] = "module";
inline constexpr const char kStackRecord[] = "stack";

// Event types (/1 and /2).
inline constexpr const char kProcessStart[] = "process_start";
inline constexpr const char kProcessExit[] = "process_exit";
inline constexpr const char kRdmaInit[] = "rdma_init";
inline constexpr const char kRdmaCall[] = "rdma_call";
inline constexpr const char kMrRegister[] = "mr_register";
inline constexpr const char kMrDeregister[] = "mr_deregister";
// Registrations at sites this file already has an mr_register line for, counted instead of
// written one by one (and the tracked deregistrations): `{"event":"mr_counts",.."sites":[
// {"stack":S,"n":N,"bytes":B},..],"deregs":D}` (additive: /2 stays /2).
inline constexpr const char kMrCounts[] = "mr_counts";
inline constexpr const char kForkInit[] = "fork_init";
inline constexpr const char kFork[] = "fork";
inline constexpr const char kForkChild[] = "fork_child";
inline constexpr const char kSpawn[] = "spawn";
inline constexpr const char kChildExec[] = "child_exec";
inline constexpr const char kUnwatchedExec[] = "unwatched_exec";
inline constexpr const char kExec[] = "exec";
inline constexpr const char kChildSegv[] = "child_segv";
inline constexpr const char kNote[] = "note";

// Keys every line has: `event`; /2 lines after the header: `ts` (ns since the header's
// `start_ns`), `seq`, and `tid` only when the writing thread is not the main thread.
inline constexpr const char kKeySchema[] = "schema";
inline constexpr const char kKeyEvent[] = "event";
inline constexpr const char kKeyTs[] = "ts";       // /2: ns since the header's start_ns
inline constexpr const char kKeyTsNs[] = "ts_ns";  // /1: ns since the epoch
inline constexpr const char kKeySeq[] = "seq";
inline constexpr const char kKeyTid[] = "tid";
// Header keys (/1: on every line).
inline constexpr const char kKeyHost[] = "host";
inline constexpr const char kKeyPid[] = "pid";
inline constexpr const char kKeyPpid[] = "ppid";
inline constexpr const char kKeyProg[] = "prog";
inline constexpr const char kKeyRank[] = "rank";
inline constexpr const char kKeyLocalRank[] = "local_rank";
inline constexpr const char kKeyJob[] = "job";
inline constexpr const char kKeyStartNs[] = "start_ns";
// Module records: `{"event":"module","id":N,"path":"..","base":"0x..","build_id":"hex"|null}`.
inline constexpr const char kKeyId[] = "id";
inline constexpr const char kKeyPath[] = "path";
inline constexpr const char kKeyBase[] = "base";
inline constexpr const char kKeyBuildId[] = "build_id";
// Stack records: `{"event":"stack","id":N,"frames":[[module,off],...,{"py":{..}}]}`; a
// module of -1 means `off` is the raw address (no loaded object held it).
inline constexpr const char kKeyFrames[] = "frames";
// Events refer to a stack by id (an int) under these keys; an array there is an inline
// stack of raw addresses (a child's SIGSEGV handler, or a fork from a signal handler that
// interrupted the shim's own log write).
inline constexpr const char kKeyStack[] = "stack";
inline constexpr const char kKeyRegStack[] = "reg_stack";
inline constexpr const char kKeyInit[] = "init";
// mr_register (/2): `"mr":[addr,len,access,handle]`, decimal ints; `call` only when it is
// not ibv_reg_mr, `dontfork` only when true.
inline constexpr const char kKeyMr[] = "mr";
inline constexpr const char kKeyCall[] = "call";
inline constexpr const char kKeyDontfork[] = "dontfork";
inline constexpr const char kDefaultRegCall[] = "ibv_reg_mr";
// fork: the suppression entry (FORKGUARD_SUPPRESSIONS, canonical text) that silenced a hazard.
inline constexpr const char kKeySuppressed[] = "suppressed";
// mr_counts: `sites` entries carry `stack` (an id), `call` and `dontfork` as the site's
// mr_register line had them (absent: ibv_reg_mr, not true), `n` registrations and their
// `bytes` since the previous mr_counts record; `deregs` (only when not 0): deregistrations
// of tracked MRs since then.
inline constexpr const char kKeySites[] = "sites";
inline constexpr const char kKeyN[] = "n";
inline constexpr const char kKeyBytes[] = "bytes";
inline constexpr const char kKeyDeregs[] = "deregs";

}  // namespace forkguard::schema
