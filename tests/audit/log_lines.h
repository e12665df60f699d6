// Reading what a program left behind: a marker's line number in a source file, the lines of
// a FORKGUARD_LOG directory, the lines containing some text, what a line says after a prefix.
#pragma once

#include <string>
#include <vector>

namespace forkguard::test_support {

// 1-based number of the first line of file `path` containing `marker`; fails the test
// (returns 0) when absent. Lets tests check reported line numbers without hard-coding.
int LineOf(const std::string& path, const std::string& marker);

// Every event of every file in directory `dir` (the shim's event log, FORKGUARD_LOG) as one
// line of JSON, read by the product's reader (test_support::DecodeEventRecords): each with its
// header's fields and its stacks by value.
std::vector<std::string> ReadLogLines(const std::string& dir);

// The lines containing all of `needles`.
std::vector<std::string> LinesWith(const std::vector<std::string>& lines,
                                   const std::vector<std::string>& needles);

// Number of non-overlapping occurrences of needle in haystack.
int CountOf(const std::string& haystack, const std::string& needle);

// The text after the first `prefix` in `text`, to the end of its line ("" when absent).
std::string TextAfter(const std::string& text, const std::string& prefix);

}  // namespace forkguard::test_support
