// A line-based unified diff (as `diff -u` prints it) for showing a reviewer what a file change
// does. The terminal guard for text berth did not write is core/untrusted_text.h.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace berth {

struct UnifiedDiffOptions {
  int context = 3;                // unchanged lines around each change (default 3)
  size_t max_bytes = 256 * 1024;  // either side larger: no diff, a note (default 256 KiB)
  size_t max_lines = 5000;        // both sides together longer: no diff, a note (default 5000)
};

/// The unified diff of `old_text` into `new_text`: "--- <old_label>" and "+++ <new_label>"
/// headers, then "@@ -l,n +l,n @@" hunks with `context` lines around each change (a count of 1
/// is left out, as diff -u does). A last line without a newline is followed by
/// "\ No newline at end of file". Equal texts give "". Inputs over the limits give
/// "(diff too large: N lines)\n" instead, N the lines of both sides together.
/// Empty `old_text` is a new file (label it "/dev/null").
std::string UnifiedDiff(std::string_view old_text, std::string_view new_text,
                        std::string_view old_label, std::string_view new_label,
                        const UnifiedDiffOptions& options = {});

}  // namespace berth
