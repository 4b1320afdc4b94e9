// defines: TokenFile: a file of token ids, validated and read as needed, in llm.c's format
// (a header of 256 little-endian int32: magic 20240520, version 1 with uint16 tokens or 2
// with uint32 tokens, the token count; then the tokens) or nanoGPT's (raw uint16 tokens,
// no header). Plain C++, no torch.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace fp8wb {

class TokenFile {
 public:
  static constexpr int32_t kMagic = 20240520;
  static constexpr size_t kHeaderBytes = 256 * 4;

  // Opens the file and reads its header. Throws std::invalid_argument naming config field
  // 'data' and the file: not a regular file, empty, an llm.c header with another version or
  // a count the file's size does not hold (a truncated or garbage file), a raw file of an
  // odd number of bytes, fewer than `min_tokens` tokens.
  TokenFile(const std::string& path, int64_t min_tokens);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  const char* format() const { return header_ ? "llm.c" : "raw uint16"; }
  int64_t size() const { return count_; }
  int token_bytes() const { return width_; }
  // Reads, not maps: a file that another process shrinks while a run reads it gives
  // std::runtime_error naming it and both sizes, not a SIGBUS that kills the process.
  uint32_t at(int64_t i) const;
  // Copies tokens [from, from + n) as int64 into out.
  void copy(int64_t from, int64_t n, int64_t* out) const;
  // The largest token, read over the whole file once (cached).
  uint32_t max_token() const;
  // Throws std::invalid_argument naming the first token >= vocab and its offset (its
  // index among the tokens, and the byte offset in the file).
  void check_vocab(int64_t vocab) const;

 private:
  std::string path_;
  // Reads `bytes` at `offset` into out; throws when the file holds fewer now.
  void read(uint64_t offset, size_t bytes, uint8_t* out) const;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;  // when opened
  uint64_t tokens_at_ = 0;   // the first token's byte
  int64_t count_ = 0;
  int width_ = 2;
  bool header_ = false;
  mutable int64_t max_ = -1;
};

}  // namespace fp8wb
