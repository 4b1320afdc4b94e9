// defines: parse_config_json(): a user's JSON config parsed strictly, with errors in a
// user's terms (private to core).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace fp8wb {

// Parses `text`, throwing std::invalid_argument, in words to follow "config ", for a key that an
// object gives twice (naming the key and, for a nested object, the key it lies under) and for text
// that is not JSON (naming the line and column, 1-based, and what was wrong there). A number out of
// range is left to nlohmann::json::out_of_range, which the caller names by field. `track` (may be
// empty) sees every parse event, as nlohmann's callback does.
nlohmann::json parse_config_json(std::string_view text,
                                 const nlohmann::json::parser_callback_t& track = nullptr);

}  // namespace fp8wb
