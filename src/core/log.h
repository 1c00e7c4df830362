// Logging: the one global (spdlog's default logger), written to stderr.
#pragma once

#include <spdlog/spdlog.h>

namespace strata::log {

// Sets the level from a name ("debug", "info", "warn", "error", "off").
void set_level(const std::string& level);

using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::warn;

}  // namespace strata::log
