#include "graphs/graph_cache.h"

#include "ops/status.h"

namespace cake {

GraphCache::GraphCache(size_t capacity) : steps_(capacity) {}

absl::StatusOr<std::shared_ptr<Step>> GraphCache::Get(const Plan& plan, const Bindings& bindings) {
  absl::MutexLock lock(&mu_);
  if (std::shared_ptr<Step>* hit = steps_.Find(plan.fingerprint())) {
    ++stats_.hits;
    if (!(*hit)->BoundTo(bindings)) {
      CAKE_RETURN_IF_ERROR((*hit)->Rebind(bindings));
      ++stats_.rebinds;
    }
    return *hit;
  }
  ++stats_.misses;
  CAKE_ASSIGN_OR_RETURN(std::unique_ptr<Step> built, Step::Build(plan, bindings));
  ++stats_.instantiations;
  return steps_.Insert(plan.fingerprint(), std::shared_ptr<Step>(std::move(built)));
}

GraphCache::Stats GraphCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.size = steps_.size();
  s.evictions = steps_.evictions();
  return s;
}

}  // namespace cake
