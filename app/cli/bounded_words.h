// defines: BoundedWords: a stream buffer in front of another that cuts every word (a run
// of characters between blanks and line ends) longer than kMostWordChars characters to its
// first ones and "…". run_cli() writes its messages through one, so that no message quotes
// a long input (a path, an id, a value of 100,000 characters) back whole, whichever
// part of fp8wb or of CLI11 wrote it.
#pragma once

#include <cstddef>
#include <streambuf>
#include <string>

namespace fp8wb::cli {

inline constexpr size_t kMostWordChars = 200;

class BoundedWords : public std::streambuf {
 public:
  explicit BoundedWords(std::streambuf* to) : to_(to) {}

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = traits_type::to_char_type(ch);
    return xsputn(&c, 1) == 1 ? ch : traits_type::eof();
  }
  // A whole write passed on at once (one write to an unbuffered stderr, not one a byte).
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::string kept;
    kept.reserve(static_cast<size_t>(n));
    for (std::streamsize i = 0; i < n; ++i) {
      const char c = s[i];
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        chars_ = 0;
        kept += c;
        continue;
      }
      // UTF-8: a continuation byte belongs to the character before it.
      const bool continuation = (static_cast<unsigned char>(c) & 0xC0) == 0x80;
      if (!continuation) ++chars_;
      if (chars_ <= kMostWordChars) {
        kept += c;
      } else if (chars_ == kMostWordChars + 1 && !continuation) {
        kept += "…";  // the rest of the word is left out
      }
    }
    const auto size = static_cast<std::streamsize>(kept.size());
    return to_->sputn(kept.data(), size) == size ? n : 0;
  }
  int sync() override { return to_->pubsync(); }

 private:
  std::streambuf* to_;
  size_t chars_ = 0;  // characters of the word being written
};

}  // namespace fp8wb::cli
