// Sizes and durations as operators write them ("230GB", "96GiB", "30m") and as berth prints them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace berth {

/// The largest size berth takes: 1 EiB, so that sums of sizes (a disk ledger) cannot overflow.
inline constexpr uint64_t kMaxSizeBytes = uint64_t{1} << 60;
/// The longest duration berth takes: 365 days, so that it still fits std::chrono's nanoseconds.
inline constexpr uint64_t kMaxDurationMs = uint64_t{365} * 24 * 3600 * 1000;

/// Parses "230GB", "96GiB", "1.7TB", "512MiB" or a plain byte count. Decimal units (kB, MB, GB,
/// TB, PB) are powers of 1000, binary ones (KiB, MiB, GiB, TiB, PiB) of 1024. nullopt if malformed
/// or above kMaxSizeBytes.
std::optional<uint64_t> ParseSize(std::string_view text);
/// True when `text` is a well-formed size above kMaxSizeBytes (ParseSize refuses it).
bool SizeTooLarge(std::string_view text);

/// Parses "30m", "1h30m", "45s", "500ms", "2d" into milliseconds. nullopt if malformed or above
/// kMaxDurationMs.
std::optional<uint64_t> ParseDurationMs(std::string_view text);
/// True when `text` is a well-formed duration above kMaxDurationMs (ParseDurationMs refuses it).
bool DurationTooLong(std::string_view text);

/// Decimal with three significant digits: "230 GB", "1.2 TB", "512 B".
std::string FormatBytes(uint64_t bytes);
/// As an operator wrote it: binary ("100 GiB") when a whole number of GiB, else FormatBytes.
std::string FormatSize(uint64_t bytes);
/// Binary, for GPU memory: "73.7 GiB".
std::string FormatGiB(uint64_t bytes);
/// "30m", "1h30m", "45s", "500ms".
std::string FormatDurationMs(uint64_t ms);
/// A number as printf's %g writes it: "0.9", "1264.3", "40".
std::string FormatDouble(double v);

}  // namespace berth
