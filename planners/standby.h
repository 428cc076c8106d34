// Standby (`standby: sleep`): a vLLM service the plan takes down is put to sleep instead of
// stopped when host memory holds its weights (vLLM's sleep mode, level 1: the weights moved to
// host RAM, the GPU memory freed, the process and its port kept), and woken instead of started
// cold when it is wanted again, a switch back or a rollback. Host memory is the ledger: a sleep
// takes its weights from MemAvailable, less the margin a prewarm also leaves (PrewarmMargin),
// and a sleeping service that memory can no longer hold beside that margin is stopped.
// Internal to planners/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/desired.h"
#include "core/observed.h"
#include "planners/draft.h"

namespace berth {

/// What a sleeping vLLM server keeps on each GPU of `gpu_total` bytes (its CUDA context, graphs
/// and allocator's pools outside the sleep's reach): a fortieth of the GPU, at least 2 GiB. The
/// plan counts it as held while the server sleeps, and the sleep step checks NVML against it.
uint64_t StandbyResidual(uint64_t gpu_total);

/// The host memory `s`'s weights take while it sleeps: the safetensors of its model (and its
/// speculative draft model) as resolved; unset when berth does not know their size.
std::optional<uint64_t> StandbyWeights(const ServiceSpec& s,
                                       const std::vector<ResolvedModel>& models);

/// Whether `s` may be put to sleep at all: standby: sleep on a vLLM service berth renders, with a
/// port to reach its sleep routes on.
bool SleepsOnStandby(const ServiceSpec& s);

/// Whether the stop `t` may put its service to sleep instead: the service is a standby, the stop
/// is the manifest's state: stopped (not absent, not a restart's), the start it makes room for
/// (`for_spec`, null: none) does not need its port (a sleeping server keeps it), and host memory
/// holds its weights beside the margin (PrewarmMargin) and `asleep_bytes`, what the plan's
/// earlier sleeps keep. `weights`: theirs, when it may; `why`: why not, for a note ("" when the
/// service asks for no standby).
bool SleepInsteadOfStop(const Transition& t, const ServiceSpec* for_spec, const ObservedMemory& mem,
                        const std::vector<ResolvedModel>& models, uint64_t asleep_bytes,
                        uint64_t* weights, std::string* why);

}  // namespace berth
