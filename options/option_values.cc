#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <sstream>

#include "base/boolean_text.h"
#include "options/option_table.h"

// An option's value read, written and checked, and RINGTRAIN_* variables read for a library:
// no command line here, so no Boost.Program_options (the library facade links this part).
namespace ringtrain {

std::optional<std::vector<int>> parseIntList(const std::string& text) {
  std::vector<int> values;
  std::string item;
  std::stringstream stream(text);
  while (std::getline(stream, item, ',')) {
    if (item.empty() || item.size() > 9 ||
        !std::all_of(item.begin(), item.end(), [](unsigned char c) { return std::isdigit(c); })) {
      return std::nullopt;
    }
    const int value = std::stoi(item);
    if (value <= 0) return std::nullopt;
    values.push_back(value);
  }
  if (values.empty()) return std::nullopt;
  return values;
}

std::string intListText(const std::vector<int>& values) {
  std::string text;
  for (const int v : values)
    text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

namespace options {

std::string numberText(double value) {
  return fmt::format("{}", value);
}

std::optional<std::string> rangeProblem(std::string_view option, double value,
                                        std::string_view valueText, const Range& range) {
  const bool low = range.min && (range.minOpen ? value <= *range.min : value < *range.min);
  const bool high = range.max && (range.maxOpen ? value >= *range.max : value > *range.max);
  if (!low && !high) return std::nullopt;
  std::string rule(range.rule);
  if (rule.empty()) {
    if (range.min && range.max) {
      rule = fmt::format("must be in {}{}, {}{}", range.minOpen ? "(" : "[", numberText(*range.min),
                         numberText(*range.max), range.maxOpen ? ")" : "]");
    } else if (range.min && range.minOpen) {
      rule = "must be greater than " + numberText(*range.min);
    } else if (range.min) {
      rule =
          *range.min == 0 ? "must not be negative" : "must be at least " + numberText(*range.min);
    } else {
      rule = "must be at most " + numberText(*range.max);
    }
  }
  // A hint says what the bounds mean ("0: off"); without one, the value given is repeated.
  const std::string tail =
      range.hint.empty() ? fmt::format(" (got {})", valueText) : std::string(range.hint);
  return fmt::format("--{} {}{}", option, rule, tail);
}

std::optional<std::string> readDouble(std::string_view option, const std::string& text,
                                      double& value) {
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() ||
      std::isspace(static_cast<unsigned char>(text[0])))
    return fmt::format("--{} '{}': expected a number", option, text);
  return std::nullopt;
}

std::optional<std::string> readInteger(std::string_view option, const std::string& text,
                                       std::int64_t min, std::uint64_t max, std::int64_t& value) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;
  const auto [end, error] = std::from_chars(first, last, value);
  if (first == last || error != std::errc() || end != last)
    return fmt::format("--{} '{}': expected a whole number", option, text);
  if (value < min || (value > 0 && static_cast<std::uint64_t>(value) > max))
    return fmt::format("--{} '{}': out of range ({} to {})", option, text, min, max);
  return std::nullopt;
}

std::optional<std::string> readBool(std::string_view option, const std::string& text, bool& value,
                                    bool onOff) {
  if (const auto parsed = parseBoolean(text)) {
    value = *parsed;
    return std::nullopt;
  }
  return fmt::format("--{} '{}': expected {} (or true/false, on/off, yes/no, 1/0)", option, text,
                     onOff ? "on or off" : "true or false");
}

std::string optionNameOf(std::string_view variable) {
  std::string name(variable.substr(std::string_view("RINGTRAIN_").size()));
  for (char& ch : name)
    ch = ch == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

std::string variableNameOf(std::string_view option) {
  std::string name = "RINGTRAIN_";
  for (const char ch : option)
    name += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return name;
}

std::string excerpt(std::string_view text) {
  std::string out;
  std::size_t used = 0;
  for (; used < text.size() && out.size() < 60; ++used) {
    const auto byte = static_cast<unsigned char>(text[used]);
    out += std::isprint(byte) ? std::string(1, text[used]) : fmt::format("\\x{:02x}", byte);
  }
  if (used < text.size()) out += "...";
  return out;
}

Given variableGiven(std::string_view variable, std::string value) {
  std::string where = fmt::format("{}={}: ", variable, excerpt(value));
  return Given{std::move(value), std::move(where)};
}

std::optional<Given> variableSet(std::string_view option) {
  const std::string variable = variableNameOf(option);
  const char* value = std::getenv(variable.c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return variableGiven(variable, value);
}

}  // namespace options
}  // namespace ringtrain
