// Sizes as the commands print them for people (info's memory needs, cache's files): whole bytes
// under 1 KiB, else one decimal in binary units.
#pragma once

#include <cstdint>
#include <string>

namespace strata::cli {

// "18 B", "1.5 KiB", "3.2 GiB"; TiB is the largest unit.
std::string human_bytes(uint64_t bytes);

}  // namespace strata::cli
