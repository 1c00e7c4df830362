// The store of recent responses: kept, read, replaced and deleted by id; bounded by count and by
// bytes, least recently used (read or written) first out; safe under concurrent use.
#include "server/responses_store.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace strata::server {
namespace {

StoredResponse response(const std::string& id, const std::string& text = "x") {
  return {{{"id", id}, {"text", text}}, OrderedJson::array({{{"type", "message"}}})};
}

TEST(ResponseStore, KeepsReadsAndDeletesById) {
  ResponseStore store(4, 1 << 20);
  EXPECT_EQ(store.get("resp_1"), nullptr);
  store.put("resp_1", response("resp_1", "hello"));
  const auto got = store.get("resp_1");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->response["text"], "hello");
  EXPECT_EQ(got->conversation.size(), 1u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_GT(store.bytes(), 0u);
  store.put("resp_1", response("resp_1", "again"));  // replaced, not added
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.get("resp_1")->response["text"], "again");
  EXPECT_TRUE(store.erase("resp_1"));
  EXPECT_FALSE(store.erase("resp_1"));
  EXPECT_EQ(store.get("resp_1"), nullptr);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
  // A reader keeps its copy after the entry is gone.
  store.put("resp_2", response("resp_2"));
  const auto held = store.get("resp_2");
  store.erase("resp_2");
  EXPECT_EQ(held->response["id"], "resp_2");
}

TEST(ResponseStore, EvictsTheLeastRecentlyUsedPastItsCount) {
  ResponseStore store(2, 1 << 20);
  store.put("a", response("a"));
  store.put("b", response("b"));
  EXPECT_NE(store.get("a"), nullptr);  // a is now more recent than b
  store.put("c", response("c"));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.get("b"), nullptr);
  EXPECT_NE(store.get("a"), nullptr);
  EXPECT_NE(store.get("c"), nullptr);
}

TEST(ResponseStore, EvictsPastItsBytesAndKeepsNothingLargerThanThem) {
  const size_t one = [] {
    ResponseStore probe(10, 1 << 20);
    probe.put("a", response("a", std::string(100, 'x')));
    return probe.bytes();
  }();
  ResponseStore store(10, 2 * one + one / 2);
  store.put("a", response("a", std::string(100, 'x')));
  store.put("b", response("b", std::string(100, 'x')));
  store.put("c", response("c", std::string(100, 'x')));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.get("a"), nullptr);
  EXPECT_LE(store.bytes(), 2 * one + one / 2);
  store.put("huge", response("huge", std::string(4 * one, 'x')));
  EXPECT_EQ(store.get("huge"), nullptr);
  EXPECT_EQ(store.size(), 2u);  // and nothing was evicted for it
  ResponseStore none(0, 1 << 20);
  none.put("a", response("a"));
  EXPECT_EQ(none.get("a"), nullptr);
}

TEST(ResponseStore, ManyThreadsPutReadAndDeleteAtOnce) {
  ResponseStore store(64, 1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&store, t] {
      for (int i = 0; i < 500; ++i) {
        const std::string id = "resp_" + std::to_string(t) + "_" + std::to_string(i % 100);
        store.put(id, response(id));
        if (auto got = store.get(id)) {
          EXPECT_EQ(got->response["id"], id);
        }
        if (i % 7 == 0) store.erase(id);
      }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_LE(store.size(), 64u);
}

}  // namespace
}  // namespace strata::server
