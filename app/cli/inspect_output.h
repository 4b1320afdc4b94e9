// defines: what `fp8wb inspect` writes (inspect_output.cpp): a tensor's table rows or JSON
// object, the footnote of the rows marked "*", the analysis' last line, and ScratchText,
// where each tensor's text waits until all are analysed and sorted. Internal to the CLI.
#pragma once

#include <cstdint>
#include <cstdio>
#include <ostream>
#include <set>
#include <string>

#include "fp8wb/core/checkpoint/checkpoint_analysis.h"

namespace fp8wb::cli::inspect_detail {

// Text kept aside in an unnamed scratch file (gone when closed, or when the process
// ends): what inspect shows of each tensor, until all are analysed and sorted.
class ScratchText {
 public:
  ScratchText();
  ~ScratchText();
  ScratchText(const ScratchText&) = delete;
  ScratchText& operator=(const ScratchText&) = delete;
  // Appends `text`; returns where it starts.
  uint64_t add(const std::string& text);
  // Writes `size` bytes from `at` to `out`.
  void copy(uint64_t at, uint64_t size, std::ostream& out);

 private:
  static const char* scratch_folder();
  [[noreturn]] void fail(const char* what) const;
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
  bool flushed_ = false;
};

// A tensor's object of --json's array, as nlohmann writes it inside the array (indented).
std::string tensor_json(const TensorAnalysis& a);

// A tensor's rows of the table: the best SQNR's recipe and its figures, the share the
// recommended recipe (named under the row) turns into 0, then its notes.
// `name_width`: the tensor column's width (names longer are cut in the middle, where
// two layers' names differ least); `other_best`: the formats whose best SQNR a row showed
// beside another format's recommendation, for the footnote said once under the table.
std::string table_rows(const TensorAnalysis& a, size_t name_width, std::set<Format>& other_best);

// The footnote of the rows marked "*", once per format: "* E4M3FNUZ: the best SQNR shown
// is of a format the recommendations are not made in: ...".
std::string other_format_note(const std::set<Format>& formats, Format recommend);

// The analysis' last line: what was analysed, in what time and, where the time is long
// enough to measure a rate (not the fixed costs of a small file), at what rate.
std::string analysis_line(double bytes, double seconds, size_t combos, bool on_gpu);

}  // namespace fp8wb::cli::inspect_detail
