// A bounded, thread-safe cache of instantiated steps keyed by plan
// fingerprint. A hit with other bindings rebinds the cached step (per-node
// updates) instead of instantiating a new graph.
#ifndef CAKE_GRAPHS_GRAPH_CACHE_H_
#define CAKE_GRAPHS_GRAPH_CACHE_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "graphs/step.h"
#include "ops/lru.h"

namespace cake {

class GraphCache {
 public:
  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t instantiations = 0;
    int64_t rebinds = 0;
    int64_t evictions = 0;
    size_t size = 0;
  };

  explicit GraphCache(size_t capacity);

  // The whole-plan step of `plan` bound to `bindings`: built and
  // instantiated on a miss, rebound on a hit whose bindings differ. The step
  // is shared with every caller of the same plan and stays valid after its
  // eviction; a later Get of the same plan with other bindings rebinds it.
  absl::StatusOr<std::shared_ptr<Step>> Get(const Plan& plan, const Bindings& bindings);
  Stats stats() const;

 private:
  mutable absl::Mutex mu_;
  Lru<std::shared_ptr<Step>> steps_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cake

#endif  // CAKE_GRAPHS_GRAPH_CACHE_H_
