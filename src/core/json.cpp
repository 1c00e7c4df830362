// JSON parsing with clear errors. Files are as large as they come, but no deeper than
// kModelFileJsonLimits allows: copies, dumps and comparisons of a document recurse over it, so
// a corrupt or hostile config nested 100,000 deep would otherwise overflow the stack later.
#include "core/json.h"

#include "core/json_limits.h"
#include "core/mmap.h"

namespace strata {

namespace {

struct TooDeep {};

}  // namespace

Json parse_json(const std::string& text, const std::string& what) {
  const size_t max_depth = kModelFileJsonLimits.max_depth;
  // The callback sees each object and array as it opens, before anything inside it is read.
  auto depth_check = [max_depth](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        static_cast<size_t>(depth) >= max_depth)
      throw TooDeep{};
    return true;
  };
  try {
    return Json::parse(text, depth_check);
  } catch (const nlohmann::json::parse_error& e) {
    fail(ErrorKind::kInvalidInput, "{}: invalid JSON: {}", what, e.what());
  } catch (const TooDeep&) {
    fail(ErrorKind::kInvalidInput, "{}: JSON nests deeper than {} levels", what, max_depth);
  }
}

Json read_json_file(const std::string& path) { return parse_json(read_file(path), path); }

}  // namespace strata
