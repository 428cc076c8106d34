// The catalogue JSON texts compiled into the binary; the definitions are generated at build time
// from planners/servers/catalogue/*.json by planners/servers/catalogue.cmake. Internal to
// catalogue.cc.
#pragma once

#include <string>

namespace berth::catalogue_embedded {

std::string VllmJson();
std::string SglangJson();
std::string LlamaServerJson();
std::string TrtllmJson();

}  // namespace berth::catalogue_embedded
