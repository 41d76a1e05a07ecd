// DataError: bad input data (a missing file, a truncated or mislabelled dataset, a sampler that
// cannot be built for the given sizes).
#pragma once

#include <stdexcept>
#include <string>

namespace ringtrain::data {

// what() is one line that names the file (or the value) and what is wrong with it, written for
// the user: the trainer prints it as it is and exits non-zero.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ringtrain::data
