// A least-recently-used map of bounded size, for the plan and graph caches.
// Not thread-safe: each cache guards it with its own mutex.
#ifndef CAKE_OPS_LRU_H_
#define CAKE_OPS_LRU_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace cake {

template <typename V>
class Lru {
 public:
  explicit Lru(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The value of `key`, now the most recently used; nullptr when absent.
  V* Find(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    return &it->second->second;
  }
  // Inserts `key` (absent) as the most recently used and evicts the least
  // recently used entries past capacity. Returns the inserted value.
  V& Insert(const std::string& key, V value) {
    entries_.emplace_front(key, std::move(value));
    index_[key] = entries_.begin();
    while (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
      ++evictions_;
    }
    return entries_.front().second;
  }
  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  int64_t evictions() const { return evictions_; }

 private:
  using Entry = std::pair<std::string, V>;
  const size_t capacity_;
  std::list<Entry> entries_;  // front: most recent
  absl::flat_hash_map<std::string, typename std::list<Entry>::iterator> index_;
  int64_t evictions_ = 0;
};

}  // namespace cake

#endif  // CAKE_OPS_LRU_H_
