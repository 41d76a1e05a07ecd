// What the three source files of checkpoint.h share: checkpoint_file.cc (the header, one file
// encoded, read and parsed), checkpoint_hdf5.cc (the HDF5 part: the schema, written and read) and
// checkpoint.cc (the folder: writing, pruning, resuming). Not for use outside storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "storage/checkpoint.h"

namespace ringtrain::storage::checkpoint_format {

// In the header and in the HDF5 part. Version 2 added the member lists (/parameter_names,
// /optimizer_state_names): see memberNames in checkpoint_hdf5.cc.
inline constexpr std::uint32_t kFormatVersion = 2;
// The longest optimiser kind ("sgd", "adamw") a checkpoint stores.
inline constexpr std::size_t kMaxKindBytes = 64;

// Throws CheckpointError "<file>: <what>".
[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what);

// The HDF5 part of a checkpoint of `content`, built in memory. Throws std::invalid_argument for
// tensors that cannot be stored (see CheckpointWriter), CheckpointError or formats::FormatError
// when HDF5 fails.
std::vector<std::uint8_t> encodeHdf5(const CheckpointContent& content);

// The content of an HDF5 part whose CRC-32C matched the header's; its step must be the header's.
// Throws CheckpointError naming `file` for a missing or malformed entry, formats::FormatError
// when an HDF5 call fails.
CheckpointContent decodeHdf5(std::span<const std::uint8_t> image, std::int64_t headerStep,
                             const std::filesystem::path& file);

// Text from the file, quoted in a message: at most 160 bytes, control characters as '?', so the
// message stays one line whatever the file holds.
std::string clipped(std::string_view line);

// The lines of `text`, without their newlines; a last line without one counts too.
std::vector<std::string_view> splitLines(std::string_view text);

}  // namespace ringtrain::storage::checkpoint_format
