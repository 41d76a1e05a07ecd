// DataError: bad input data (a missing file, a truncated or mislabelled dataset, a sampler that
// cannot be built for the given sizes).
#pragma once

#include "formats/format_error.h"

namespace ringtrain::data {

// what() is one line that names the file (or the value) and what is wrong with it, written for
// the user: the trainer prints it as it is and exits non-zero. A FormatError, as the errors of
// the file formats data/ reads through (formats/) are: a handler of formats::FormatError catches
// every bad-input error of a data set.
class DataError : public formats::FormatError {
 public:
  using formats::FormatError::FormatError;
};

}  // namespace ringtrain::data
