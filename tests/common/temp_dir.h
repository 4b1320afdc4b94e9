// defines: remove_tree(): deletes a folder and everything in it, through POSIX nftw().
// PyTorch's pip wheels export their own copy of std::filesystem::remove_all from
// libtorch.so, which binds in any program linked with LibTorch and crashes there (it calls
// a libstdc++ internal that the system's libstdc++ no longer has): tests that link
// LibTorch use this instead.
#pragma once

#include <ftw.h>

#include <cstdio>
#include <string>

namespace fp8wb::test {

inline void remove_tree(const std::string& path) {
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

}  // namespace fp8wb::test
