// berth tune's report (issue 40), four ways: the plan before anything is switched, the results
// table at the end, the JSON that --resume reads back, and an SVG plot of throughput against
// latency. Pure functions of a TuneReport (core/tune.h): no I/O, deterministic.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "core/tune.h"

namespace berth {

/// `berth tune --plan`: a table of the candidates (the declared configuration first), each with
/// its feasibility (an outcome that is not kInfeasible is feasible), the plan's switch mode and
/// its dark window (expected / worst) and its settings; then the reason of each infeasible one
/// in full.
std::string TunePlanText(const TuneReport& report);

/// The results: a table of the candidates (verdict, gates passed, output tok/s, req/s, TTFT,
/// TPOT and E2E percentiles, the switch's measured time beside the dark window planned, the
/// limits met or what was missed), each candidate's settings, the best one against the declared
/// configuration (or why there is none), the failures and infeasible ones with their reasons,
/// what the host runs now and the patch to commit.
std::string TuneResultText(const TuneReport& report);

/// Every field of `report` as JSON, with "format": 1: keys snake_case, figures in ms and tok/s,
/// verdicts as "measured", "infeasible", "failed", "not_run", the winner as an index into
/// "outcomes" or null.
std::string TuneReportJson(const TuneReport& report);

/// The report TuneReportJson wrote (`berth tune --resume`). InvalidArgument names the key
/// that is missing, of the wrong type or out of range, or not of this writer's making; text
/// over 16 MiB or nested deeper than the report is refused. Never throws.
Result<TuneReport> TuneReportFromJson(std::string_view text);

/// An SVG 1.1 document: output tok/s (y) against TTFT p99, or TPOT p99 when the objective
/// limits TPOT and not TTFT (x), one labelled point per measured candidate, the winner
/// highlighted, each limit on the x axis a dashed line with the region past it shaded, a title
/// naming the service and the model, and a note listing the failed, infeasible and unrun
/// candidates. Self-contained (no scripts, no external fonts), text escaped, deterministic.
std::string TunePlotSvg(const TuneReport& report);

/// "measured", "infeasible", "failed", "not_run": the JSON's word for `v`.
const char* TuneVerdictWord(TuneOutcome::Verdict v);

}  // namespace berth
