// The RINGTRAIN_* variables that scripts/, data/ and k8s/ read or export, and the tests' own:
// they name no option of the programs, yet are no misspelling. main.cc registers them with the
// option machinery (options::registerKnownVariables), which knows nothing of the scripts; a test
// checks this list against the scripts.
#pragma once

#include <string_view>
#include <vector>

namespace ringtrain::commands {

const std::vector<std::string_view>& scriptVariables();

}  // namespace ringtrain::commands
