// FormatError: a file that cannot be read or written as its format says (missing, truncated,
// damaged, forged, not synced to disk), and the base of the programs' other bad-input errors
// (data::DataError, storage::CheckpointError): a handler for bad input catches this one.
#pragma once

#include <stdexcept>

namespace ringtrain::formats {

// what() is one line that names the file (or the value) and what is wrong with it, written for
// the user: the programs print it as it is and exit with kExitBadInput.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ringtrain::formats
