// BenchConfig: everything `ringtrain bench` is told, and the one table of its options
// (options/option_table.h derives parsing, --help, --config, the RINGTRAIN_* variables and the
// start-up comparison from it). Filled as `ringtrain train`'s options are: the command line, then
// RINGTRAIN_* variables, then a --config file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/named_values.h"
#include "engine/exchange_factory.h"
#include "engine/exchange_options.h"
#include "options/option_table.h"

namespace ringtrain::bench {

// How `ringtrain bench` stands in for a layer's computation: sleep (the core stays free, so many
// ranks can share few cores) or spin (the core is busy, as real computation would keep it).
enum class StandIn { kSleep, kSpin };
inline constexpr NamedValue<StandIn> kStandInNames[] = {{StandIn::kSleep, "sleep"},
                                                        {StandIn::kSpin, "spin"}};

// Everything `ringtrain bench` is told (src/bench/profile_bench.h runs it).
struct BenchConfig {
  std::string profile = "resnet50";  // a profile's name (bench/profiles/NAME.txt) or a file
  double computeMs = 100;            // one step's forward and backward, per rank
  StandIn standIn = StandIn::kSleep;
  std::int64_t warmupSteps = 5;  // not timed
  int chunks = 5;                // timed chunks, for the spread of the throughput
  std::int64_t stepsPerChunk = 10;
  int batchSize = 0;         // samples per rank per step, for samples/s (0: none reported)
  double linkGbit = 0;       // the link's rate for the analytic bound (0: unshaped)
  double linkLatencyUs = 0;  // one message's latency on the link, for the bound
  std::string json;          // rank 0 writes the results here as JSON ("" : none)

  // The gradient engine's settings as `ringtrain train` takes them (options/exchange_settings.h
  // declares their options for both programs); host buffers only, auto settled at start.
  engine::ExchangeSettings exchange;

  // RINGTRAIN_* variables that name no option, for rank 0 to warn about once.
  std::vector<std::string> parseWarnings;
};

// The one table of the options.
const options::Table<BenchConfig>& benchOptionTable();

// Parses argv (without the "bench" word), the environment and --config. Returns the error of the
// first bad value as one line naming the option, or nullopt. `help` is set (and the help text
// written to helpText) when --help was given.
std::optional<std::string> parseBenchConfig(int argc, const char* const* argv, BenchConfig& config,
                                            bool& help, std::string& helpText);

// The options every rank must agree on, as (--name, value) pairs (see the train's).
std::vector<std::pair<std::string, std::string>> comparableOptions(const BenchConfig& config);

}  // namespace ringtrain::bench
