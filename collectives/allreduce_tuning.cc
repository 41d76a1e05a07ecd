#include "collectives/allreduce_tuning.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "base/file_checks.h"
#include "base/log.h"
#include "collectives/mpi_check.h"
#include "collectives/node_topology.h"

namespace ringtrain::collectives {
namespace {

constexpr std::string_view kFormat = "ringtrain-allreduce-tuning";
constexpr int kFormatVersion = 1;
constexpr std::size_t kKiB = 1024;

using Json = nlohmann::json;

Json ruleJson(const TuningRule& rule) {
  return Json{{"max_bytes", rule.maxBytes == kUnboundedBytes ? Json(nullptr) : Json(rule.maxBytes)},
              {"algorithm", std::string(name(rule.algorithm))}};
}

TuningRule parseRule(const Json& json, bool last) {
  if (!json.is_object()) throw std::invalid_argument("a rule is not an object");
  TuningRule rule;
  const Json& bytes = json.at("max_bytes");
  if (bytes.is_null() && last) {
    rule.maxBytes = kUnboundedBytes;
  } else if (bytes.is_number_unsigned()) {
    rule.maxBytes = bytes.get<std::size_t>();
  } else {
    throw std::invalid_argument("max_bytes must be a byte count (null only in the last rule)");
  }
  const std::string algorithm = json.at("algorithm").get<std::string>();
  const auto value = valueIn(kAllreduceAlgorithmNames, algorithm);
  if (!value) {
    throw std::invalid_argument("unknown algorithm '" + algorithm + "' (known: " +
                                joinNames(kAllreduceAlgorithmNames, ", ", ", ") + ")");
  }
  rule.algorithm = *value;
  if (rule.algorithm == AllreduceAlgorithm::kRecursiveDoubling &&
      rule.maxBytes > kMaxRecursiveDoublingBytes) {
    throw std::invalid_argument("recursive-doubling takes at most " +
                                std::to_string(kMaxRecursiveDoublingBytes) + " bytes");
  }
  return rule;
}

std::vector<TuningRule> parseRules(const Json& json) {
  if (!json.is_array() || json.empty())
    throw std::invalid_argument("rules must be a non-empty list");
  std::vector<TuningRule> rules;
  for (std::size_t i = 0; i < json.size(); ++i) {
    rules.push_back(parseRule(json[i], i + 1 == json.size()));
    if (i > 0 && rules[i].maxBytes <= rules[i - 1].maxBytes)
      throw std::invalid_argument("rules' max_bytes must ascend");
  }
  return rules;
}

int positiveInt(const Json& json, const char* key) {
  const int value = json.at(key).get<int>();
  if (value < 1) throw std::invalid_argument(std::string(key) + " must be at least 1");
  return value;
}

// What rank 0 found in the tuning file, as every rank receives it.
struct Verdict {
  enum Kind { kUse, kIgnore, kRefuse } kind = kUse;
  std::string message;  // why ignored or refused
  std::string table;    // the table's text (kUse)
};

Verdict readOnRoot(const std::string& path, const RankLayout& layout) {
  if (auto problem = base::regularFileProblem(path)) {
    return {Verdict::kRefuse, "tuning file " + path + ": " + *problem, ""};
  }
  std::ifstream file(path);
  if (!file) return {Verdict::kRefuse, "tuning file " + path + ": cannot be read", ""};
  std::stringstream text;
  text << file.rdbuf();
  try {
    const TuningTable table = parseTuningTable(text.str());
    if (auto reason = foreignTableReason(table, layout)) {
      return {Verdict::kIgnore,
              "tuning file " + path + " ignored (" + *reason + "); using the built-in table", ""};
    }
    return {Verdict::kUse, "", tuningTableText(table)};
  } catch (const std::exception& e) {
    return {Verdict::kRefuse, "tuning file " + path + ": " + e.what(), ""};
  }
}

void broadcastString(MPI_Comm comm, std::string& text) {
  unsigned long long length = text.size();
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, 0, comm));
  text.resize(length);
  RINGTRAIN_MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0, comm));
}

}  // namespace

std::string_view name(AllreduceAlgorithm algorithm) {
  return nameIn(kAllreduceAlgorithmNames, algorithm);
}

RankLayout rankLayoutOf(MPI_Comm comm, int ranksPerNode) {
  const std::vector<int> nodes = nodeOfEachRank(comm, ranksPerNode);
  RankLayout layout;
  layout.worldSize = static_cast<int>(nodes.size());
  layout.ranksPerNode = 0;
  for (const int node : nodes) {
    layout.ranksPerNode = std::max(layout.ranksPerNode,
                                   static_cast<int>(std::count(nodes.begin(), nodes.end(), node)));
  }
  return layout;
}

AllreduceAlgorithm TuningTable::choose(std::size_t bytes) const {
  for (const TuningRule& rule : rules)
    if (bytes <= rule.maxBytes) return rule.algorithm;
  return rules.back().algorithm;
}

bool TuningTable::uses(AllreduceAlgorithm algorithm) const {
  return std::any_of(rules.begin(), rules.end(),
                     [&](const TuningRule& rule) { return rule.algorithm == algorithm; });
}

std::size_t TuningTable::recursiveDoublingBytes() const {
  std::size_t bytes = 0;
  for (const TuningRule& rule : rules)
    if (rule.algorithm == AllreduceAlgorithm::kRecursiveDoubling) bytes = rule.maxBytes;
  return bytes;
}

std::string summary(const TuningTable& table) {
  std::string text;
  for (const TuningRule& rule : table.rules) {
    text += (text.empty() ? "" : ", ") + std::string(name(rule.algorithm)) +
            (rule.maxBytes == kUnboundedBytes ? (text.empty() ? " at every size" : " above")
                                              : " up to " + std::to_string(rule.maxBytes) + " B");
  }
  return text;
}

TuningTable builtinTuningTable(const RankLayout& layout) {
  using enum AllreduceAlgorithm;
  TuningTable table{layout, cpuModel(), ringtrainBuild(), {}};
  if (layout.oneNode()) {
    // allreduce_perf --autotune, 2 ranks on one node (docs/collectives.md, "The tuned backend").
    // kRingCached writes through the cache, as MPI_Allreduce does, and keeps pace with it whether
    // or not the ranks' cores share a cache; kRing is faster only where they share none.
    table.rules = {{8 * kKiB, kRecursiveDoubling}, {kUnboundedBytes, kRingCached}};
  } else {
    // Not measured across nodes: the ring backend's own split.
    table.rules = {{32 * kKiB, kRecursiveDoubling}, {kUnboundedBytes, kRing}};
  }
  return table;
}

TuningTable ringBackendTable(std::size_t smallBytes) {
  return {RankLayout{},
          "",
          "",
          {{smallBytes, AllreduceAlgorithm::kRecursiveDoubling},
           {kUnboundedBytes, AllreduceAlgorithm::kRing}}};
}

TuningTable singleAlgorithmTable(const RankLayout& layout, AllreduceAlgorithm algorithm) {
  TuningTable table{layout, cpuModel(), ringtrainBuild(), {{kUnboundedBytes, algorithm}}};
  if (algorithm == AllreduceAlgorithm::kRecursiveDoubling) {
    table.rules = {{kMaxRecursiveDoublingBytes, algorithm},
                   {kUnboundedBytes, AllreduceAlgorithm::kRing}};
  }
  return table;
}

std::string cpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "unknown";
}

std::string ringtrainBuild() {
  return RINGTRAIN_VERSION;
}

std::string tuningTableText(const TuningTable& table) {
  Json rules = Json::array();
  for (const TuningRule& rule : table.rules)
    rules.push_back(ruleJson(rule));
  const Json json{{"format", kFormat},
                  {"version", kFormatVersion},
                  {"world_size", table.layout.worldSize},
                  {"ranks_per_node", table.layout.ranksPerNode},
                  {"cpu", table.cpu},
                  {"ringtrain", table.build},
                  {"rules", rules}};
  return json.dump(2) + "\n";
}

TuningTable parseTuningTable(std::string_view text) {
  try {
    const Json json = Json::parse(text);
    if (!json.is_object() || json.value("format", "") != kFormat)
      throw std::invalid_argument("not a ringtrain tuning table (no \"format\": \"" +
                                  std::string(kFormat) + "\")");
    const int version = json.at("version").get<int>();
    if (version != kFormatVersion) {
      throw std::invalid_argument("format version " + std::to_string(version) +
                                  ", this build reads version " + std::to_string(kFormatVersion) +
                                  " (run allreduce_perf --autotune again)");
    }
    TuningTable table;
    table.layout = {positiveInt(json, "world_size"), positiveInt(json, "ranks_per_node")};
    table.cpu = json.at("cpu").get<std::string>();
    table.build = json.at("ringtrain").get<std::string>();
    table.rules = parseRules(json.at("rules"));
    return table;
  } catch (const Json::exception& e) {
    throw std::invalid_argument(std::string("not valid: ") + e.what());
  }
}

std::optional<std::string> foreignTableReason(const TuningTable& table, const RankLayout& layout) {
  if (table.layout != layout) {
    return "measured for " + std::to_string(table.layout.worldSize) + " ranks, " +
           std::to_string(table.layout.ranksPerNode) + " per node; this job has " +
           std::to_string(layout.worldSize) + ", " + std::to_string(layout.ranksPerNode) +
           " per node";
  }
  if (table.cpu != cpuModel())
    return "measured on CPU '" + table.cpu + "', this is '" + cpuModel() + "'";
  // Stale: another version's algorithms may not run at the speeds it measured.
  if (table.build != ringtrainBuild())
    return "measured by ringtrain " + table.build + ", this is " + ringtrainBuild();
  return std::nullopt;
}

TuningTable agreedTuningTable(MPI_Comm comm, const RankLayout& layout, const std::string& path) {
  if (path.empty()) return builtinTuningTable(layout);
  int rank = 0;
  RINGTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  Verdict verdict = rank == 0 ? readOnRoot(path, layout) : Verdict{};
  int kind = verdict.kind;
  RINGTRAIN_MPI_CHECK(MPI_Bcast(&kind, 1, MPI_INT, 0, comm));
  broadcastString(comm, verdict.message);
  broadcastString(comm, verdict.table);
  if (kind == Verdict::kRefuse) throw std::invalid_argument(verdict.message);
  if (kind == Verdict::kIgnore) {
    if (rank == 0) logLine(LogLevel::kWarn, verdict.message);
    return builtinTuningTable(layout);
  }
  return parseTuningTable(verdict.table);
}

void writeTuningFile(const std::string& path, const TuningTable& table) {
  std::ofstream file(path);
  file << tuningTableText(table);
  file.close();
  if (!file) throw std::runtime_error("cannot write tuning file " + path);
}

}  // namespace ringtrain::collectives
