// JSON metadata of nn::Checkpoint, for the library (nn/checkpoint.cpp)
// and the tandem command: private, as tensor/io/json_private.h, whose values
// they take. The public Checkpoint API keeps JSON as text (set, get), so
// that no installed header names nlohmann-json.
#pragma once

#include <string_view>

#include "nn/serialize.h"
#include "tensor/io/json_private.h"

namespace tandem::nn {

// Sets key to value written as compact JSON (json::dump: NaN and infinities
// are a ValueError).
void set_json(Checkpoint& checkpoint, std::string_view key, const json::Value& value);
// The metadata under key, parsed; an absent key is the KeyError of
// Checkpoint::get, text that is not JSON a SerializationError naming the
// checkpoint, the key and the parse error.
json::Value get_json(const Checkpoint& checkpoint, std::string_view key);

}  // namespace tandem::nn
