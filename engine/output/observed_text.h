// What berth sees on a host, for people (`berth observe`); `-o json` is ObservedToJson.
#pragma once

#include <string>

#include "core/observed.h"

namespace berth {

/// The host, its store and models, GPUs with their processes and units, units and ports.
std::string ObservedToText(const Observed& o);

}  // namespace berth
