#include "planner/plan_cache.h"

namespace cake {

PlanCache::PlanCache(size_t capacity) : plans_(capacity) {}

std::shared_ptr<const Plan> PlanCache::Find(const std::string& fingerprint) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<const Plan>* hit = plans_.Find(fingerprint);
  ++(hit != nullptr ? stats_.hits : stats_.misses);
  return hit != nullptr ? *hit : nullptr;
}

std::shared_ptr<const Plan> PlanCache::Insert(const std::string& fingerprint,
                                              std::shared_ptr<const Plan> plan) {
  absl::MutexLock lock(&mu_);
  // Another thread planned the same step first: keep one copy.
  if (std::shared_ptr<const Plan>* existing = plans_.Find(fingerprint)) return *existing;
  return plans_.Insert(fingerprint, std::move(plan));
}

PlanCache::Stats PlanCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.size = plans_.size();
  s.capacity = plans_.capacity();
  s.evictions = plans_.evictions();
  return s;
}

}  // namespace cake
