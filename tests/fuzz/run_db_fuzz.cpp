// libFuzzer target: a foreign run database, as `runs list/show/export --db` and `runs
// import` read it. Whatever the bytes, reading the file gives its runs or a StoreError,
// and importing it adds its runs to a fresh database or throws a StoreError leaving that
// database as it was; never a crash, another exception, or an allocation beyond the
// memory limit (-rss_limit_mb, -malloc_limit_mb: a small file must not make its reader
// allocate gigabytes, as a view over a recursive query or a generated column could).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "fp8wb/core/store/run_store.h"

namespace {

const std::string& folder() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/fp8wb-run-db-fuzz-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (!d) std::abort();
    return std::string(d);
  }();
  return dir;
}

void remove_db(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

void read_all(const std::string& path) {
  auto s = fp8wb::RunStore::open_read_only(path);
  for (const fp8wb::RunInfo& r : s->runs()) {
    for (const std::string& name : s->series_names(r.id)) s->series(r.id, name);
    s->tensor_stats(r.id);
    s->blobs(r.id);
    s->events(r.id);
    s->rank_scales(r.id);
    fp8wb::RunCursor cursor;
    s->read_new(r.id, cursor);
    std::ostringstream csv;
    fp8wb::write_run_csv(*s, r.id, csv);
    fp8wb::write_tensor_stats_csv(*s, r.id, csv);
  }
  s->sweeps();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source = folder() + "/source.sqlite";
  const std::string target = folder() + "/target.sqlite";
  remove_db(source);
  remove_db(target);
  {
    std::ofstream f(source, std::ios::binary);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    read_all(source);
  } catch (const fp8wb::StoreError&) {
  }
  {
    auto t = fp8wb::RunStore::open(target);
    const size_t before = t->runs().size();
    try {
      const fp8wb::ImportReport rep = t->import_runs(source);
      if (t->runs().size() != before + static_cast<size_t>(rep.added)) __builtin_trap();
      read_all(target);  // what was imported reads back
    } catch (const fp8wb::StoreError&) {
      if (t->runs().size() != before) __builtin_trap();  // all or nothing
    }
    if (t->integrity_check() != "ok") __builtin_trap();
  }
  remove_db(source);
  remove_db(target);
  return 0;
}
