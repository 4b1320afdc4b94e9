#include "fp8wb/core/data/corpus.h"

extern "C" const char fp8wb_corpus_begin[];
extern "C" const char fp8wb_corpus_end[];

namespace fp8wb {

std::string_view bundled_corpus() {
  return {fp8wb_corpus_begin, static_cast<size_t>(fp8wb_corpus_end - fp8wb_corpus_begin)};
}

}  // namespace fp8wb
