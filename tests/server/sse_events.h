// Server-sent events as the Anthropic and Responses streams write them: frames of
// "event: NAME\ndata: JSON\n\n" whose data's type is the name. The tests of both APIs split a
// stream with sse_events, which checks each frame's form.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace strata::test {

template <typename J>  // nlohmann::json or nlohmann::ordered_json
struct SseEvent {
  std::string name;
  J data;
};

template <typename J>
std::vector<SseEvent<J>> sse_events(std::string_view sse) {
  std::vector<SseEvent<J>> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    if (end == std::string_view::npos) {
      ADD_FAILURE() << "an unterminated frame: " << sse.substr(pos);
      break;
    }
    const std::string frame(sse.substr(pos, end - pos));
    pos = end + 2;
    const size_t newline = frame.find('\n');
    EXPECT_EQ(frame.rfind("event: ", 0), 0u) << frame;
    EXPECT_EQ(frame.substr(newline + 1, 6), "data: ") << frame;
    SseEvent<J> e{frame.substr(7, newline - 7), J::parse(frame.substr(newline + 7))};
    EXPECT_EQ(e.data["type"], e.name) << frame;
    out.push_back(std::move(e));
  }
  return out;
}

template <typename J>
std::vector<std::string> event_names(const std::vector<SseEvent<J>>& events) {
  std::vector<std::string> out;
  for (const SseEvent<J>& e : events) out.push_back(e.name);
  return out;
}

}  // namespace strata::test
