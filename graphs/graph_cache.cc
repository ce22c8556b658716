#include "graphs/graph_cache.h"

#include "ops/status.h"

namespace cake {

GraphCache::GraphCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

absl::StatusOr<std::shared_ptr<Step>> GraphCache::Get(const Plan& plan, const Bindings& bindings) {
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(plan.fingerprint()); it != index_.end()) {
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, it->second);
    std::shared_ptr<Step> step = it->second->second;
    if (!step->BoundTo(bindings)) {
      CAKE_RETURN_IF_ERROR(step->Rebind(bindings));
      ++stats_.rebinds;
    }
    return step;
  }
  ++stats_.misses;
  CAKE_ASSIGN_OR_RETURN(std::unique_ptr<Step> built, Step::Build(plan, bindings));
  ++stats_.instantiations;
  lru_.emplace_front(plan.fingerprint(), std::shared_ptr<Step>(std::move(built)));
  index_[plan.fingerprint()] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
    ++stats_.evictions;
  }
  return lru_.front().second;
}

GraphCache::Stats GraphCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.size = lru_.size();
  return s;
}

}  // namespace cake
