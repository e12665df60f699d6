// The CLI's text formatting: numbers, sizes, durations, hex, paths, and fitting text to a
// terminal's columns. One home for what the renderers (report_render, report_html,
// stack_view, job_report, symbolizer) and the commands print; a leaf (std only), so every
// output byte is decided here once. JSON strings are JsonQuote's (json.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace forkguard::cli {

// "0x7f3a…" (lower case, no padding).
std::string Hex(uint64_t v);
// Bytes as lower-case hex digits, two per byte ("e3b0c442…": a build-id).
std::string HexBytes(const unsigned char* p, size_t n);

// "512 B", "4.0 KiB", "1.5 MiB", "2.0 GiB" (powers of 1024, one decimal).
std::string FormatBytes(int64_t bytes);
// "850 ms" below a second, else "1.2 s".
std::string FormatMs(int64_t ms);
// "1 process", "3 processes".
std::string Plural(int64_t n, const char* one, const char* many);

// The last component of a path ("libc.so.6" for "/lib/x86_64-linux-gnu/libc.so.6"); the
// path itself when it has no '/'.
std::string Basename(const std::string& path);
// The directory of a path: "." when it has no '/', "/" for "/file".
std::string Dirname(const std::string& path);

// Display width in code points (good enough for ASCII plus a few symbols such as "…", "×").
size_t DisplayWidth(const std::string& s);
// Cuts a line to `width` columns with a trailing "…".
std::string Fit(const std::string& s, size_t width);
// Keeps the end of a long location ("…/dir/file.jsonl:3"): the file name and line matter
// most.
std::string FitLeft(const std::string& s, size_t width);
// Word-wraps `text` (split at single spaces) to `width` columns, each line ending in "\n":
// the first line starts with `first`, the others with `indent`; a word longer than a line is
// cut by Fit.
std::string Wrap(const std::string& first, const std::string& indent, const std::string& text,
                 size_t width);

}  // namespace forkguard::cli
