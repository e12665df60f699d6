// Stack capture and symbolization.
//
// Capture is cheap (raw instruction pointers from libunwind's unw_backtrace, bounded depth)
// and happens on registration and fork. Symbolization (dladdr: object + offset, dynamic
// symbol name) happens only when a message is printed or an event is logged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "formats/text_buffer.h"

namespace forkguard {

// Only ips[0..depth) mean anything. At run time the rest is left as it is: zeroing 512
// bytes was a tenth of what the shim added to a registration. Constant initialization
// (the shim's constinit tables) zeroes it all.
struct RawStack {
  static constexpr int kCapacity = 64;
  int depth = 0;
  uintptr_t ips[kCapacity];

  constexpr RawStack() {
    if (std::is_constant_evaluated()) {
      for (uintptr_t& ip : ips) ip = 0;
    }
  }
};

// Frames of the shim itself are dropped, so ips[0] is the caller of the intercepted
// function. Never allocates with malloc.
void CaptureStack(RawStack* out, int max_depth);

// The same stack for a call site that is reached again and again (registration): the
// first time libunwind walks it, later calls from the same return address with the same
// frames above it check those frames on the live stack (a few loads per frame) instead of
// unwinding. Call it from the shim's hooks only (it finds the intercepted call through
// the shim's own frame pointers); falls back to CaptureStack when unsure.
void CaptureRepeatedStack(RawStack* out, int max_depth);

// Records the address range of the shim's own code; called from the constructor. Safe to
// call again. Capture before it ran keeps the shim's frames (harmless, just longer).
void InitOwnCodeRange();
// dlopens libunwind (RTLD_LOCAL) once. Not on the clean fork path: every mapping it adds
// is copied by every fork, so processes that never touch RDMA never load it. Until it is
// loaded CaptureStack returns empty stacks.
void LoadUnwinder();
bool IsOwnCode(uintptr_t ip);

struct SymbolizedFrame {
  uintptr_t ip = 0;
  const char* obj = nullptr;  // full path of the object (owned by the loader), or nullptr
  uintptr_t obj_off = 0;      // ip - load base of obj
  const char* sym = nullptr;  // dynamic symbol name, or nullptr
  uintptr_t sym_off = 0;
};

// Validates the symbolization cache against objects loaded/unloaded since the last call;
// call once before symbolizing a batch of stacks (takes the loader lock briefly).
void BeginSymbolizing();

// dladdr on ip (ip - 1 for return addresses, i.e. every frame but the first, so that a call
// at the end of a function is attributed to it). Takes the loader lock: not for signal
// handlers.
SymbolizedFrame Symbolize(uintptr_t ip, bool is_return_address);

// Absolute path of the main executable ("" when /proc is unavailable).
const char* MainExecutableFile();

// True for frames inside the RDMA libraries or the shim (not "user" code).
bool IsRdmaLibraryObject(const char* obj);

// Appends "#<i> <func>+0x<off> (<obj>+0x<off>)" with a C++-demangled name when
// `demangle` (no malloc: libstdc++'s callback demangler; still not for the child: dladdr).
void FormatFrame(TextBuffer& out, int index, const SymbolizedFrame& f, bool demangle);

// The name a user recognizes for the first frame outside the RDMA libraries and the shim:
// "func (obj+0xoff)".
void FormatInnermostUserFrame(TextBuffer& out, const RawStack& stack, bool demangle);

// The demangled name of a C++ symbol ("ns::f(int)") into buf; false (buf "") for other names
// or when the demangler is not linked in. No malloc.
bool DemangleSymbol(const char* sym, char* buf, size_t cap);

// True when ip is the x86-64 signal return trampoline (the frame below it was interrupted).
bool IsSignalTrampoline(uintptr_t ip);

// Hash of the call site that stays equal across processes of the same program (object
// basenames and offsets, not raw addresses, which differ under ASLR).
uint64_t StackSiteHash(const RawStack& stack);

}  // namespace forkguard
