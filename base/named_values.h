// Names of an enum's values, in one table per enum, which parsing, --help, error messages and
// logs all read: an array of {value, name} entries, e.g.
//   inline constexpr NamedValue<Backend> kBackendNames[] = {{Backend::kMpi, "mpi"}, ...};
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ringtrain {

template <class Enum>
struct NamedValue {
  Enum value;
  std::string_view name;
};

// The name of `value` in `table` ("?" for a value the table lacks, which is a bug).
template <class Table, class Enum>
std::string_view nameIn(const Table& table, Enum value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

template <class Table>
auto valueIn(const Table& table, std::string_view name)
    -> std::optional<decltype(std::begin(table)->value)> {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

// "auto | cpu | cuda" (separator " | "), or "auto, cpu or cuda" (separator ", ", last " or ").
template <class Table>
std::string joinNames(const Table& table, std::string_view separator,
                      std::string_view lastSeparator) {
  std::string text;
  const auto count = static_cast<std::size_t>(std::end(table) - std::begin(table));
  std::size_t i = 0;
  for (const auto& entry : table) {
    if (i > 0) text += i + 1 == count ? lastSeparator : separator;
    text += entry.name;
    ++i;
  }
  return text;
}

}  // namespace ringtrain
