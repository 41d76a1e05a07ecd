// The items of a comma-separated option value ("mlp,cnn"), the programs' one reading of a list.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace ringtrain::base {

// The comma-separated items of `text`, empty ones skipped.
inline std::vector<std::string> commaSeparated(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

}  // namespace ringtrain::base
