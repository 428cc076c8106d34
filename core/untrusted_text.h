// Text berth did not write (servers' answers, a command's output, file names, etcd keys, the
// journal): how it is cut, how it is kept as JSON can carry it, and how it reaches a terminal.
// Every printer of such text goes through EscapeControl or EscapeLine; every cut through
// Utf8Prefix or Utf8Suffix, so a cut never ends inside a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace berth {

/// Whether `text` is UTF-8 (what JSON can carry as a string, byte for byte): no overlong forms,
/// no surrogates, nothing past U+10FFFF.
bool IsUtf8(std::string_view text);

/// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a UTF-8
/// character. Bytes that are not UTF-8 count as one character each.
std::string_view Utf8Prefix(std::string_view text, size_t max_bytes);

/// The longest suffix of `text` of at most `max_bytes` bytes that does not begin inside a UTF-8
/// character (the tail of a command's output).
std::string_view Utf8Suffix(std::string_view text, size_t max_bytes);

/// `text` with every byte that is not part of a UTF-8 character written as "\xNN" (the bytes
/// stay visible, and the result is UTF-8). Everything else, controls included, is kept.
std::string VisibleBytes(std::string_view text);

/// `text` made safe to print on a terminal: control characters other than newline and tab
/// (ESC, CR, BEL, DEL, the C1 controls), the bidirectional overrides and bytes that are not
/// UTF-8 are written as "\xNN", so text from outside cannot move the cursor, recolour or
/// retitle the reader's terminal. For text that keeps its lines (a diff, a journal excerpt).
std::string EscapeControl(std::string_view text);

/// EscapeControl for text that must stay on one line: newline and tab are escaped too.
std::string EscapeLine(std::string_view text);

/// A one-line excerpt of text from outside: at most `max_bytes` of it, cut on a character
/// boundary and followed by "..." when cut, then EscapeLine'd.
std::string Excerpt(std::string_view text, size_t max_bytes = 200);

}  // namespace berth
