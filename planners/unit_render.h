// Rendering the systemd unit of a service. The pieces it is made of have their own headers,
// included here so that one include gives the whole API: engines/adapter.h (the command line, one
// adapter per engine), unit_syntax.h (quoting, reading ExecStart= back) and unit_diff.h
// (comparing with the unit on disk). Pure.
#pragma once

#include <string>
#include <vector>

#include "core/desired.h"
#include "core/unit_marker.h"
#include "planners/servers/adapter.h"
#include "planners/unit_diff.h"
#include "planners/unit_syntax.h"

namespace berth {

struct RenderedUnit {
  std::string name;               // "vllm-minimax-m25.service"
  std::string content;            // the whole file, header included
  std::string spec_hash;          // sha256 of the body (what berth compares; the header may change)
  std::vector<std::string> argv;  // ExecStart, unquoted
  /// The Environment= assignments, "KEY=VALUE" in the unit's order, and its EnvironmentFile=
  /// ("" for none): what the unit's process gets over systemd's own environment (the engine
  /// check runs with them).
  std::vector<std::string> env;
  std::string env_file;
  std::string refused;  // RenderUnit only: why no unit could be written, else ""
};

/// The unit file of `service`: berth's header (marker, version, spec hash), then [Unit],
/// [Service] (ExecStart from ServiceArgv, CUDA_VISIBLE_DEVICES, the offline HF cache, env) and
/// [Install]. Every value is written through UnitValue; a value no unit file can hold (a control
/// character, which the manifest loader refuses first) gives InvalidArgument naming the field.
Result<RenderedUnit> TryRenderUnit(const ServiceSpec& service, const RenderContext& ctx);

/// TryRenderUnit for callers that expect a unit: when it is refused, `refused` says why and
/// `content` is berth's header and that reason as a comment, with no [Service] section, so that
/// systemd will not start it. Never emits a control character in a value.
RenderedUnit RenderUnit(const ServiceSpec& service, const RenderContext& ctx);

}  // namespace berth
