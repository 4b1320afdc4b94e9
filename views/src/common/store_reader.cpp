// open_store_reader() (store_reader.h): the views' read-only connections to the store.
#include "fp8wb/views/common/store_reader.h"

#include <filesystem>
#include <system_error>

#include "fp8wb/core/store/run_store.h"

namespace fp8wb {

std::unique_ptr<RunStore> open_store_reader(const std::string& path) {
  // Said as what it is, not as "no run database at " and nothing.
  if (path.empty()) throw StoreError("no run database chosen (its path is empty)");
  return RunStore::open_read_only(path);
}

std::unique_ptr<RunStore> open_store_reader_if_made(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return nullptr;  // none yet
  return open_store_reader(path);
}

}  // namespace fp8wb
