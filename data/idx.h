// The IDX file format of the MNIST family (LeCun's: magic 0 0 type ndim,
// then ndim big-endian int32 sizes, then the values, big-endian), read
// whole, gzip-compressed or not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/core/tensor.h"

namespace tandem::data {

// The tensor an IDX file holds, on the cpu: uint8 (type 0x08), int32
// (0x0C), float32 (0x0D) or float64 (0x0E), with the file's sizes. A file
// whose first two bytes are gzip's magic is decompressed first (zlib).
// Throws SerializationError naming the file and what was wrong: missing or
// unreadable, a wrong magic number, sizes that disagree with the file's
// length, a truncated or corrupt gzip stream; NotImplementedError for the
// IDX types Tandem has no dtype for (int8, int16), or for a gzip file in a
// build without zlib.
Tensor read_idx(const std::string& path);

// The bytes of a file, gunzipped when they start with gzip's magic (for
// the readers of other formats). Errors as read_idx's.
std::vector<uint8_t> read_maybe_gzipped(const std::string& path);

// Whether this build reads gzip files (it was built with zlib).
bool has_gzip();

}  // namespace tandem::data
