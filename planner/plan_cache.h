// A bounded LRU cache of plans keyed by fingerprint, safe to use from many
// threads.
#ifndef CAKE_PLANNER_PLAN_CACHE_H_
#define CAKE_PLANNER_PLAN_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cake/plan.pb.h"
#include "ops/lru.h"

namespace cake {

class PlanCache {
 public:
  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t evictions = 0;
    size_t size = 0;
    size_t capacity = 0;
  };

  explicit PlanCache(size_t capacity);

  // The plan with this fingerprint, now the most recently used; nullptr (and a
  // miss counted) when absent.
  std::shared_ptr<const Plan> Find(const std::string& fingerprint);
  // Inserts (or keeps the existing entry for) `fingerprint` and returns the
  // cached plan; evicts the least recently used entry past capacity.
  std::shared_ptr<const Plan> Insert(const std::string& fingerprint,
                                     std::shared_ptr<const Plan> plan);
  Stats stats() const;

 private:
  mutable absl::Mutex mu_;
  Lru<std::shared_ptr<const Plan>> plans_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cake

#endif  // CAKE_PLANNER_PLAN_CACHE_H_
