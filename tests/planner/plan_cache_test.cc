#include "planner/plan_cache.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace cake {
namespace {

std::shared_ptr<const Plan> PlanNamed(const std::string& fp) {
  auto p = std::make_shared<Plan>();
  p->set_fingerprint(fp);
  return p;
}

TEST(PlanCacheTest, CountsHitsAndMisses) {
  PlanCache cache(4);
  EXPECT_EQ(cache.Find("a"), nullptr);
  cache.Insert("a", PlanNamed("a"));
  ASSERT_NE(cache.Find("a"), nullptr);
  EXPECT_EQ(cache.Find("a")->fingerprint(), "a");
  const PlanCache::Stats s = cache.stats();
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.size, 1u);
  EXPECT_EQ(s.capacity, 4u);
}

TEST(PlanCacheTest, BoundedLeastRecentlyUsedOut) {
  PlanCache cache(3);
  for (const char* k : {"a", "b", "c"}) cache.Insert(k, PlanNamed(k));
  ASSERT_NE(cache.Find("a"), nullptr);  // a is now the most recent
  cache.Insert("d", PlanNamed("d"));    // evicts b, the least recent
  EXPECT_EQ(cache.stats().size, 3u);
  EXPECT_EQ(cache.stats().evictions, 1);
  EXPECT_EQ(cache.Find("b"), nullptr);
  EXPECT_NE(cache.Find("a"), nullptr);
  EXPECT_NE(cache.Find("c"), nullptr);
  EXPECT_NE(cache.Find("d"), nullptr);
  for (int i = 0; i < 100; ++i) cache.Insert("k" + std::to_string(i), PlanNamed("k"));
  EXPECT_EQ(cache.stats().size, 3u);
  EXPECT_EQ(cache.stats().evictions, 101);
}

TEST(PlanCacheTest, SecondInsertKeepsTheFirstPlan) {
  PlanCache cache(2);
  auto first = PlanNamed("x");
  EXPECT_EQ(cache.Insert("x", first), first);
  EXPECT_EQ(cache.Insert("x", PlanNamed("x")), first);
  EXPECT_EQ(cache.stats().size, 1u);
}

}  // namespace
}  // namespace cake
