// Token files (token_file.h): mapped read-only, the header checked against the file's size.
#include "fp8wb/core/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fp8wb/core/file_io.h"

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
  map_bytes_ = static_cast<size_t>(st.st_size);
  auto refuse = [&](const std::string& why) {
    if (map_) munmap(const_cast<uint8_t*>(map_), map_bytes_);
    ::close(fd_);
    map_ = nullptr;
    fd_ = -1;
    throw std::invalid_argument(what + ": " + why);
  };
  if (map_bytes_ == 0) refuse("the file is empty");
  void* m = mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (m == MAP_FAILED) refuse(std::string("cannot map it: ") + std::strerror(errno));
  map_ = static_cast<const uint8_t*>(m);
  if (map_bytes_ >= 4 && le32(map_) == kMagic) {
    // llm.c: 256 int32 (magic, version, token count, the rest reserved), then the tokens.
    header_ = true;
    if (map_bytes_ < kHeaderBytes) {
      refuse("an llm.c header (magic " + std::to_string(kMagic) + ") cut off at " +
             std::to_string(map_bytes_) + " bytes of its " + std::to_string(kHeaderBytes));
    }
    const int32_t version = le32(map_ + 4);
    if (version != 1 && version != 2) {
      refuse("llm.c header version " + std::to_string(version) +
             " is not 1 (uint16 tokens) or 2 (uint32 tokens)");
    }
    width_ = version == 1 ? 2 : 4;
    const int32_t count = le32(map_ + 8);
    const uint64_t have = (map_bytes_ - kHeaderBytes) / static_cast<uint64_t>(width_);
    if (count < 0 || static_cast<uint64_t>(count) != have ||
        (map_bytes_ - kHeaderBytes) % static_cast<uint64_t>(width_) != 0) {
      refuse("the llm.c header says " + std::to_string(count) + " tokens, the file holds " +
             std::to_string(map_bytes_ - kHeaderBytes) + " bytes of tokens (" +
             std::to_string(have) + " of " + std::to_string(width_) +
             " bytes): truncated, or not a token file");
    }
    count_ = count;
    tokens_ = map_ + kHeaderBytes;
  } else {
    // nanoGPT: raw uint16 tokens.
    if (map_bytes_ % 2 != 0) {
      refuse("neither an llm.c token file (no magic " + std::to_string(kMagic) +
             ") nor raw uint16 tokens (" + std::to_string(map_bytes_) + " bytes, an odd number)");
    }
    count_ = static_cast<int64_t>(map_bytes_ / 2);
    tokens_ = map_;
  }
  if (count_ < min_tokens) {
    refuse("holds " + std::to_string(count_) + " tokens, fewer than the " +
           std::to_string(min_tokens) +
           " the run needs (context + 1 for training and the "
           "held-out windows)");
  }
  madvise(const_cast<uint8_t*>(map_), map_bytes_, MADV_RANDOM);
}

TokenFile::~TokenFile() {
  if (map_) munmap(const_cast<uint8_t*>(map_), map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

uint32_t TokenFile::at(int64_t i) const {
  const uint8_t* p = tokens_ + i * width_;
  if (width_ == 2) return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8;
  return static_cast<uint32_t>(le32(p));
}

void TokenFile::copy(int64_t from, int64_t n, int64_t* out) const {
  for (int64_t i = 0; i < n; ++i) out[i] = at(from + i);
}

uint32_t TokenFile::max_token() const {
  if (max_ < 0) {
    uint32_t m = 0;
    for (int64_t i = 0; i < count_; ++i) m = std::max(m, at(i));
    max_ = m;
  }
  return static_cast<uint32_t>(max_);
}

void TokenFile::check_vocab(int64_t vocab) const {
  if (static_cast<int64_t>(max_token()) < vocab) return;
  for (int64_t i = 0; i < count_; ++i) {
    if (static_cast<int64_t>(at(i)) >= vocab) {
      const uint64_t byte = (header_ ? kHeaderBytes : 0) + static_cast<uint64_t>(i) * width_;
      throw std::invalid_argument("config field 'data': " + path_ + ": token " +
                                  std::to_string(at(i)) + " at offset " + std::to_string(i) +
                                  " (byte " + std::to_string(byte) +
                                  ") is not below the "
                                  "model's vocabulary of " +
                                  std::to_string(vocab));
    }
  }
}

}  // namespace fp8wb
