#include "planner/plan_cache.h"

namespace cake {

PlanCache::PlanCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

std::shared_ptr<const Plan> PlanCache::Find(const std::string& fingerprint) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(fingerprint);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

std::shared_ptr<const Plan> PlanCache::Insert(const std::string& fingerprint,
                                              std::shared_ptr<const Plan> plan) {
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(fingerprint); it != index_.end()) {
    // Another thread planned the same step first; keep one copy.
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  lru_.emplace_front(fingerprint, std::move(plan));
  index_[fingerprint] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
    ++stats_.evictions;
  }
  return lru_.front().second;
}

PlanCache::Stats PlanCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.size = lru_.size();
  s.capacity = capacity_;
  return s;
}

}  // namespace cake
