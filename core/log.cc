#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>

namespace berth {

void InitLogging(const std::string& level) {
  std::string l = level;
  if (l.empty()) {
    const char* env = std::getenv("BERTH_LOG_LEVEL");
    l = env && *env ? env : "warn";
  }
  static auto logger = [] {
    auto lg = spdlog::stderr_logger_mt("berth");
    lg->set_pattern("%Y-%m-%dT%H:%M:%S.%e berth[%P] %l: %v");
    spdlog::set_default_logger(lg);
    return lg;
  }();
  logger->set_level(spdlog::level::from_str(l));
}

}  // namespace berth
