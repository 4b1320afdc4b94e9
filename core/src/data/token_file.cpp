// Token files (token_file.h): read with pread, the header checked against the file's size.
#include "fp8wb/core/data/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "fp8wb/core/checkpoint/file_io.h"

namespace fp8wb {
namespace {

int32_t le32(const uint8_t* p) {
  return static_cast<int32_t>(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                              static_cast<uint32_t>(p[2]) << 16 |
                              static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

TokenFile::TokenFile(const std::string& path, int64_t min_tokens) : path_(path) {
  const std::string what = "config field 'data': " + path;
  try {
    fd_ = open_regular_file(path);
  } catch (const FileError& e) {
    throw std::invalid_argument("config field 'data': " + std::string(e.what()));
  }
  struct stat st {};
  if (fstat(fd_, &st) != 0) {
    ::close(fd_);
    throw std::invalid_argument(what + ": " + std::strerror(errno));
  }
  file_bytes_ = static_cast<uint64_t>(st.st_size);
  auto refuse = [&](const std::string& why) {
    ::close(fd_);
    fd_ = -1;
    throw std::invalid_argument(what + ": " + why);
  };
  if (file_bytes_ == 0) refuse("the file is empty");
  uint8_t head[12] = {};
  if (file_bytes_ >= sizeof head) read(0, sizeof head, head);
  if (file_bytes_ >= 4 && le32(head) == kMagic) {
    // llm.c: 256 int32 (magic, version, token count, the rest reserved), then the tokens.
    header_ = true;
    if (file_bytes_ < kHeaderBytes) {
      refuse("an llm.c header (magic " + std::to_string(kMagic) + ") cut off at " +
             std::to_string(file_bytes_) + " bytes of its " + std::to_string(kHeaderBytes));
    }
    const int32_t version = le32(head + 4);
    if (version != 1 && version != 2) {
      refuse("llm.c header version " + std::to_string(version) +
             " is not 1 (uint16 tokens) or 2 (uint32 tokens)");
    }
    width_ = version == 1 ? 2 : 4;
    const int32_t count = le32(head + 8);
    const uint64_t have = (file_bytes_ - kHeaderBytes) / static_cast<uint64_t>(width_);
    if (count < 0 || static_cast<uint64_t>(count) != have ||
        (file_bytes_ - kHeaderBytes) % static_cast<uint64_t>(width_) != 0) {
      refuse("the llm.c header says " + std::to_string(count) + " tokens, the file holds " +
             std::to_string(file_bytes_ - kHeaderBytes) + " bytes of tokens (" +
             std::to_string(have) + " of " + std::to_string(width_) +
             " bytes): truncated, or not a token file");
    }
    count_ = count;
    tokens_at_ = kHeaderBytes;
  } else {
    // nanoGPT: raw uint16 tokens.
    if (file_bytes_ % 2 != 0) {
      refuse("neither an llm.c token file (no magic " + std::to_string(kMagic) +
             ") nor raw uint16 tokens (" + std::to_string(file_bytes_) + " bytes, an odd number)");
    }
    count_ = static_cast<int64_t>(file_bytes_ / 2);
    tokens_at_ = 0;
  }
  if (count_ < min_tokens) {
    refuse("holds " + std::to_string(count_) + " tokens, fewer than the " +
           std::to_string(min_tokens) +
           " needed (two windows of the context + 1: one to train on, "
           "one held out for the loss)");
  }
}

TokenFile::~TokenFile() {
  if (fd_ >= 0) ::close(fd_);
}

void TokenFile::read(uint64_t offset, size_t bytes, uint8_t* out) const {
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    struct stat st {};
    const std::string now =
        fstat(fd_, &st) == 0 ? std::to_string(st.st_size) + " bytes" : "unreadable";
    throw std::runtime_error(
        "token file " + path_ + ": " +
        (n < 0 ? std::string("read failed: ") + std::strerror(errno)
               : "it holds " + now + " now, " + std::to_string(file_bytes_) +
                     " when the run opened it: changed while the run read it") +
        " (bytes " + std::to_string(offset + done) + " to " + std::to_string(offset + bytes) + ")");
  }
}

uint32_t TokenFile::at(int64_t i) const {
  uint8_t p[4] = {};
  read(tokens_at_ + static_cast<uint64_t>(i) * static_cast<uint64_t>(width_),
       static_cast<size_t>(width_), p);
  if (width_ == 2) return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8;
  return static_cast<uint32_t>(le32(p));
}

void TokenFile::copy(int64_t from, int64_t n, int64_t* out) const {
  if (n <= 0) return;
  std::vector<uint8_t> buf(static_cast<size_t>(n) * static_cast<size_t>(width_));
  read(tokens_at_ + static_cast<uint64_t>(from) * static_cast<uint64_t>(width_), buf.size(),
       buf.data());
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = buf.data() + i * width_;
    out[i] =
        width_ == 2
            ? static_cast<int64_t>(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8)
            : static_cast<int64_t>(static_cast<uint32_t>(le32(p)));
  }
}

uint32_t TokenFile::max_token() const {
  if (max_ < 0) {
    // In chunks of 1 Mi tokens: memory stays bounded whatever the file's size.
    constexpr int64_t kChunk = 1 << 20;
    std::vector<int64_t> buf(static_cast<size_t>(std::min(kChunk, count_)));
    int64_t m = 0;
    for (int64_t at = 0; at < count_; at += kChunk) {
      const int64_t n = std::min(kChunk, count_ - at);
      copy(at, n, buf.data());
      for (int64_t i = 0; i < n; ++i) m = std::max(m, buf[static_cast<size_t>(i)]);
    }
    max_ = m;
  }
  return static_cast<uint32_t>(max_);
}

void TokenFile::check_vocab(int64_t vocab) const {
  if (static_cast<int64_t>(max_token()) < vocab) return;
  constexpr int64_t kChunk = 1 << 20;
  std::vector<int64_t> buf(static_cast<size_t>(std::min(kChunk, count_)));
  for (int64_t at = 0; at < count_; at += kChunk) {
    const int64_t n = std::min(kChunk, count_ - at);
    copy(at, n, buf.data());
    for (int64_t k = 0; k < n; ++k) {
      const int64_t token = buf[static_cast<size_t>(k)];
      if (token < vocab) continue;
      const int64_t i = at + k;
      const uint64_t byte = tokens_at_ + static_cast<uint64_t>(i) * static_cast<uint64_t>(width_);
      throw std::invalid_argument(
          "config field 'data': " + path_ + ": token " + std::to_string(token) + " at offset " +
          std::to_string(i) + " (byte " + std::to_string(byte) +
          ") is not below the model's vocabulary of " + std::to_string(vocab));
    }
  }
}

}  // namespace fp8wb
