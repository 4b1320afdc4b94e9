// defines: bundled_corpus(): the public-domain text the character-level models train on,
// embedded in the library (resources/corpus/README.md says what it is).
#pragma once

#include <string_view>

namespace fp8wb {

std::string_view bundled_corpus();

}  // namespace fp8wb
