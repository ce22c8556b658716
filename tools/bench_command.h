// `cake bench`: the benchmark of BENCH.md on this GPU (bench/runner.h).
#ifndef CAKE_TOOLS_BENCH_COMMAND_H_
#define CAKE_TOOLS_BENCH_COMMAND_H_

#include <map>
#include <string>
#include <vector>

namespace cake {

extern const char kBenchUsage[];
extern const char kBenchHelp[];
extern const std::vector<std::string> kBenchFlags;

// Exit 0 when every case ran, 2 for bad flags or specs, 1 for a failure on
// the device, 3 without a CUDA device.
int RunBenchCommand(const std::vector<std::string>& spec_files,
                    const std::map<std::string, std::string>& flags);

}  // namespace cake

#endif  // CAKE_TOOLS_BENCH_COMMAND_H_
