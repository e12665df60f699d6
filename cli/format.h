// The CLI's text formatting: numbers, sizes, durations, hex, paths, fitting text to a
// terminal's columns, and escaping for each output. One home for what the renderers
// (report_text, report_json, report_markdown, report_html, stack_view, job_report,
// symbolizer) and the commands print; a leaf (std only), so every output byte is decided here
// once. JSON strings are JsonQuote's (json.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

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

// Escaping, one function per output. Names, paths and texts come from logs other users
// wrote, from /proc or from the environment: printed, they must stay text, never a terminal
// escape, a new line, Markdown or XML markup, or a CI workflow command.

// The length of the valid UTF-8 sequence at s[i] (1 for ASCII), or 0 when s[i] does not start
// one (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, cut short).
// The one check of UTF-8 for every output (EscapeText, the JSON writer).
size_t Utf8Length(std::string_view s, size_t i);

// Terminal and plain-text output (the text report, ps, doctor, GitHub workflow commands):
// each byte of a control character (below 0x20, 0x7f, and U+0080-U+009F, which terminals
// may take as C1 controls), of a line or paragraph separator or a bidirectional embedding,
// override or isolate (U+2028-U+202E, U+2066-U+2069: they reorder what is shown), of U+FFFE
// and U+FFFF (not characters), and each byte that is not part of valid UTF-8, as "\xNN" (lower-case
// hex). Everything else is kept as it is, '\\' included: the result has nothing left to escape, so
// escaping twice is escaping once.
std::string EscapeText(std::string_view s);
// Markdown (CommonMark and GitHub's) inline text: EscapeText's, then a backslash before each
// character that can open or close markup: \ ` * _ ~ [ ] < > | # & ! $. '(' and ')' are kept:
// they make a link only after an unescaped ']'. Meant for text inside a line (after "- ",
// in a table cell), never at its start.
std::string MarkdownText(std::string_view s);
// A Markdown code span of `s`: EscapeText's, '|' as a space (it would split a table cell),
// between enough backticks that none inside can close it.
std::string MarkdownCode(std::string_view s);
// XML 1.0 text and attribute values (JUnit): EscapeText's (which leaves no character XML 1.0
// forbids, and valid UTF-8), then & < > " ' as entities.
std::string XmlText(std::string_view s);
// SARIF message text, where "[text](target)" is an embedded link (SARIF 2.1.0, 3.11.6):
// '\\', '[' and ']' escaped with a backslash, as the standard asks for literal ones.
std::string SarifMessageText(std::string_view s);
// GitHub workflow commands ("::error file=F,title=T::MESSAGE", the toolkit's escapeData and
// escapeProperty) after EscapeText (the lines are read in terminals too): '%', '\r' and '\n'
// (and in a property ':' and ',') percent-encoded, so the runner reads back exactly the
// escaped text and a line holds one command.
std::string GithubCommandData(std::string_view s);
std::string GithubCommandProperty(std::string_view s);

// Display width in code points (good enough for ASCII plus a few symbols such as "…", "×").
size_t DisplayWidth(const std::string& s);
// The line makers below escape their text with EscapeText first: a line of text output made
// by them is one line, whatever it quotes.
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
