#include "base/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

namespace ringtrain {

std::optional<std::size_t> parseByteSize(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [rest, status] = std::from_chars(text.data(), end, value, std::chars_format::fixed);
  if (status != std::errc()) return std::nullopt;
  std::string unit(rest, end);
  if (unit.ends_with("iB")) {
    unit.resize(unit.size() - 2);
    if (unit.empty()) return std::nullopt;  // "64iB"
  } else if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) {
    unit.pop_back();
  }
  if (unit.size() > 1) return std::nullopt;
  if (unit.size() == 1) {
    const std::string units = "KMG";
    const auto power =
        units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    if (power == std::string::npos) return std::nullopt;
    value *= std::pow(1024.0, static_cast<double>(power + 1));
  }
  if (value >= 0x1p63) return std::nullopt;
  return static_cast<std::size_t>(value);
}

std::string byteSizeText(std::size_t bytes) {
  for (const auto& [shift, unit] : {std::pair{30, "G"}, {20, "M"}, {10, "K"}}) {
    const std::size_t step = std::size_t{1} << shift;
    if (bytes >= step && bytes % step == 0) return std::to_string(bytes / step) + unit;
  }
  return std::to_string(bytes);
}

}  // namespace ringtrain
