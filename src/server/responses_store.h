// ResponseStore: the recent responses of POST /v1/responses with store: true, in memory, for
// GET and DELETE /v1/responses/{id} and for previous_response_id (a request continuing a stored
// conversation). Bounded by a count and by bytes (their JSON text); past either, the least
// recently used go first (a read counts as a use). Safe to use from several threads.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

namespace strata::server {

using OrderedJson = nlohmann::ordered_json;

struct StoredResponse {
  OrderedJson response;      // the response object as it was answered
  OrderedJson conversation;  // its items: the conversation it continued, its input, its output
};

class ResponseStore {
 public:
  // max_entries 0: nothing is kept.
  ResponseStore(size_t max_entries, size_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // Keeps the response under its id (replacing one of that id), then evicts down to the bounds;
  // one larger than max_bytes alone is not kept.
  void put(const std::string& id, StoredResponse response);
  std::shared_ptr<const StoredResponse> get(const std::string& id);  // null when absent
  bool erase(const std::string& id);                                 // false when absent

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<const StoredResponse> value;
    size_t bytes = 0;
  };
  using Order = std::list<Entry>;  // most recently used first

  void drop(Order::iterator it);  // under the mutex

  const size_t max_entries_;
  const size_t max_bytes_;
  mutable std::mutex mutex_;
  Order order_;
  std::unordered_map<std::string, Order::iterator> by_id_;
  size_t bytes_ = 0;
};

}  // namespace strata::server
