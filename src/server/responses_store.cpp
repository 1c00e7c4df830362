// The bounded store of recent responses: a list in order of use and an index by id, under a mutex.
#include "server/responses_store.h"

#include "server/openai_response.h"

namespace strata::server {

void ResponseStore::put(const std::string& id, StoredResponse response) {
  // Measured outside the lock: the text of a long conversation takes a while to write.
  const size_t bytes =
      id.size() + dump(response.response).size() + dump(response.conversation).size();
  auto value = std::make_shared<const StoredResponse>(std::move(response));
  std::lock_guard lock(mutex_);
  if (auto it = by_id_.find(id); it != by_id_.end()) drop(it->second);
  if (max_entries_ == 0 || bytes > max_bytes_) return;
  order_.push_front(Entry{id, std::move(value), bytes});
  by_id_[id] = order_.begin();
  bytes_ += bytes;
  while (order_.size() > max_entries_ || bytes_ > max_bytes_) drop(std::prev(order_.end()));
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);  // iterators stay valid
  return it->second->value;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  drop(it->second);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return order_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

void ResponseStore::drop(Order::iterator it) {
  bytes_ -= it->bytes;
  by_id_.erase(it->id);
  order_.erase(it);
}

}  // namespace strata::server
