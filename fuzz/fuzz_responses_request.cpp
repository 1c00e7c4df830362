// libFuzzer target: any bytes, up to the server's 16 MiB body limit, as the body of /v1/responses,
// through the path of request_path.h.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "request_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strata::fuzz::run_responses_request(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
