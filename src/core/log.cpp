// Logger set-up.
#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace strata::log {

void set_level(const std::string& level) {
  static const bool once = [] {
    spdlog::set_default_logger(spdlog::stderr_color_mt("strata"));
    spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    return true;
  }();
  (void)once;
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace strata::log
