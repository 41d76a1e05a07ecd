// On/off values as people write them, read one way by every program and the library:
// --overlap=true, --synthetic=1, RINGTRAIN_OVERLAP=off.
#pragma once

#include <optional>
#include <string_view>

namespace ringtrain {

// true/on/yes/1 or false/off/no/0; nullopt for anything else.
inline std::optional<bool> parseBoolean(std::string_view text) {
  for (const std::string_view yes : {"true", "on", "yes", "1"})
    if (text == yes) return true;
  for (const std::string_view no : {"false", "off", "no", "0"})
    if (text == no) return false;
  return std::nullopt;
}

}  // namespace ringtrain
