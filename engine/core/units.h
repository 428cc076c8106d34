// Sizes and durations as operators write them ("230GB", "96GiB", "30m") and as berth prints them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace berth {

/// Parses "230GB", "96GiB", "1.7TB", "512MiB" or a plain byte count. Decimal units (kB, MB, GB,
/// TB, PB) are powers of 1000, binary ones (KiB, MiB, GiB, TiB, PiB) of 1024. nullopt if malformed.
std::optional<uint64_t> ParseSize(std::string_view text);

/// Parses "30m", "1h30m", "45s", "500ms", "2d" into milliseconds. nullopt if malformed.
std::optional<uint64_t> ParseDurationMs(std::string_view text);

/// Decimal with three significant digits: "230 GB", "1.2 TB", "512 B".
std::string FormatBytes(uint64_t bytes);
/// As an operator wrote it: binary ("100 GiB") when a whole number of GiB, else FormatBytes.
std::string FormatSize(uint64_t bytes);
/// Binary, for GPU memory: "73.7 GiB".
std::string FormatGiB(uint64_t bytes);
/// "30m", "1h30m", "45s", "500ms".
std::string FormatDurationMs(uint64_t ms);

}  // namespace berth
