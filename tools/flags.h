// The parsed --flags of a `cake` command, shared by the commands' sources.
#ifndef CAKE_TOOLS_FLAGS_H_
#define CAKE_TOOLS_FLAGS_H_

#include <map>
#include <string>

namespace cake {

// The value of --name, or `fallback` when the flag was not given.
inline std::string FlagOr(const std::map<std::string, std::string>& flags,
                          const std::string& name, const std::string& fallback) {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

}  // namespace cake

#endif  // CAKE_TOOLS_FLAGS_H_
