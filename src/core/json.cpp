// JSON parsing with clear errors.
#include "core/json.h"

#include "core/mmap.h"

namespace strata {

Json parse_json(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(ErrorKind::kInvalidInput, "{}: invalid JSON: {}", what, e.what());
  }
}

Json read_json_file(const std::string& path) { return parse_json(read_file(path), path); }

}  // namespace strata
