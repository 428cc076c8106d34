// The adapters AdapterFor hands out, one per engine. Internal to planners/servers/.
#pragma once

#include "planners/servers/adapter.h"

namespace berth::engines {

const EngineAdapter& Vllm();
const EngineAdapter& Sglang();
const EngineAdapter& LlamaServer();
const EngineAdapter& Trtllm();
const EngineAdapter& Command();

/// "4": the text of an int for argv.
inline std::string Int(int64_t v) { return std::to_string(v); }

}  // namespace berth::engines
