// Safetensors: what the writer writes the reader reads back bit for bit (every dtype,
// sharded sets, DeepSeek-style FP8 blocks); malformed files give errors naming the
// tensor or byte offset; the per-tensor analysis against direct computations.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "fifo.h"
#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/kernels/codec.h"
#include "fp8wb/kernels/quantize_cpu.h"
#include "temp_dir.h"

namespace fp8wb {
namespace {

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fp8wb-st-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    test::remove_tree(dir_.string());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { test::remove_tree(dir_.string()); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  std::filesystem::path dir_;
};

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

TEST_F(Safetensors, RoundTripsEveryDtype) {
  const std::vector<float> f32 = gaussian(6, 1);
  const std::vector<double> f64 = {1.5, -2.25, 1e300};
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC000, 0x7F80};  // 1, -2, inf
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001};   // 1, -2, 2^-24
  const std::vector<int32_t> i32 = {-7, 0, 7};
  const std::vector<uint8_t> e4m3 = {0x38, 0xB8, 0x7E};  // 1, -1, 448
  write_safetensors(path("all.safetensors"),
                    {{"f32", StDtype::F32, {2, 3}, bytes_of(f32)},
                     {"f64", StDtype::F64, {3}, bytes_of(f64)},
                     {"bf16", StDtype::BF16, {3}, bytes_of(bf16)},
                     {"f16", StDtype::F16, {3}, bytes_of(f16)},
                     {"i32", StDtype::I32, {3}, bytes_of(i32)},
                     {"e4m3", StDtype::F8_E4M3, {3}, e4m3},
                     {"empty", StDtype::F32, {0, 4}, {}}},
                    {{"format", "pt"}});
  auto c = Checkpoint::open(path("all.safetensors"));
  ASSERT_EQ(c->tensors().size(), 7u);
  const auto* t = c->find("f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->entry->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(t->file->bytes(*t->entry).data(), f32.data(), 24), 0);  // bit for bit
  EXPECT_EQ(c->to_float(*t), f32);
  EXPECT_EQ(c->to_float(*c->find("f64")), (std::vector<float>{1.5f, -2.25f, INFINITY}));
  EXPECT_EQ(c->to_float(*c->find("bf16")), (std::vector<float>{1, -2, INFINITY}));
  EXPECT_EQ(c->to_float(*c->find("f16")), (std::vector<float>{1, -2, std::ldexp(1.0f, -24)}));
  EXPECT_EQ(c->to_float(*c->find("i32")), (std::vector<float>{-7, 0, 7}));
  EXPECT_EQ(c->to_float(*c->find("e4m3")), (std::vector<float>{1, -1, 448}));
  EXPECT_TRUE(c->to_float(*c->find("empty")).empty());
  EXPECT_EQ(c->tensors()[0].file->metadata().at("format"), "pt");
}

TEST_F(Safetensors, DeepSeekFp8BlocksAreDequantizedWithTheirScales) {
  // A 256 x 200 E4M3 weight with 2 x 2 blocks of 128 (the last ones partial).
  const int64_t rows = 256, cols = 200;
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i % 0x7E);
  const std::vector<float> scale_inv = {0.5f, 2.0f, 0.25f, 8.0f};
  write_safetensors(path("ds.safetensors"),
                    {{"w", StDtype::F8_E4M3, {rows, cols}, codes},
                     {"w_scale_inv", StDtype::F32, {2, 2}, bytes_of(scale_inv)}});
  auto c = Checkpoint::open(path("ds.safetensors"));
  const std::vector<float> w = c->to_float(*c->find("w"));
  const CodecSpec s = codec_spec(Format::E4M3FN);
  for (int64_t i : {0L, 127L, 128L, 255L}) {
    for (int64_t j : {0L, 127L, 128L, 199L}) {
      const size_t k = static_cast<size_t>(i * cols + j);
      EXPECT_EQ(w[k],
                decode(codes[k], s) * scale_inv[static_cast<size_t>((i / 128) * 2 + j / 128)]);
    }
  }
  // The scales are folded into the weight: the analysis lists the weight only.
  AnalysisOptions o;
  o.formats = {Format::E4M3FN};
  o.kinds = {ScalingKind::Tensorwise};
  const auto a = analyze_checkpoint(*c, o);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].name, "w");
  // A scale grid that does not match the weight's blocks names both tensors.
  write_safetensors(path("bad.safetensors"),
                    {{"w", StDtype::F8_E4M3, {rows, cols}, codes},
                     {"w_scale_inv", StDtype::F32, {4, 1}, bytes_of(scale_inv)}});
  auto bad = Checkpoint::open(path("bad.safetensors"));
  try {
    bad->to_float(*bad->find("w"));
    FAIL() << "a wrong scale grid was accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("w_scale_inv"), std::string::npos) << e.what();
  }
}

TEST_F(Safetensors, ShardedSetsOpenThroughTheirIndex) {
  write_safetensors(path("a.safetensors"),
                    {{"x", StDtype::F32, {2}, bytes_of(std::vector<float>{1, 2})}});
  write_safetensors(path("b.safetensors"),
                    {{"y", StDtype::F32, {1}, bytes_of(std::vector<float>{3})}});
  std::ofstream(path("model.safetensors.index.json"))
      << R"({"metadata": {}, "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})";
  auto c = Checkpoint::open(path("model.safetensors.index.json"));
  ASSERT_EQ(c->tensors().size(), 2u);
  EXPECT_EQ(c->to_float(*c->find("y")), std::vector<float>{3});
  EXPECT_TRUE(c->unindexed().empty());
  // A shard's tensor that the weight_map does not name is no part of the set, and is
  // reported as such (by shard, in the shards' order).
  write_safetensors(path("c.safetensors"),
                    {{"w", StDtype::F32, {1}, bytes_of(std::vector<float>{4})},
                     {"extra", StDtype::F32, {1}, bytes_of(std::vector<float>{5})}});
  std::ofstream(path("part.index.json"))
      << R"({"weight_map": {"x": "a.safetensors", "w": "c.safetensors"}})";
  c = Checkpoint::open(path("part.index.json"));
  EXPECT_EQ(c->tensors().size(), 2u);
  EXPECT_EQ(c->find("extra"), nullptr);
  EXPECT_EQ(c->unindexed(),
            (std::vector<std::pair<std::string, std::string>>{{"extra", "c.safetensors"}}));
  std::ofstream(path("bad.index.json")) << R"({"weight_map": {"x": "../etc/passwd"}})";
  EXPECT_THROW(Checkpoint::open(path("bad.index.json")), CheckpointError);
  std::ofstream(path("missing.index.json")) << R"({"weight_map": {"z": "a.safetensors"}})";
  EXPECT_THROW(Checkpoint::open(path("missing.index.json")), CheckpointError);
  // A shard that is not there is named with the index and a tensor of it.
  std::ofstream(path("gone.index.json"))
      << R"({"weight_map": {"x": "a.safetensors", "q": "gone.safetensors"}})";
  try {
    Checkpoint::open(path("gone.index.json"));
    ADD_FAILURE() << "a missing shard was accepted";
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path("gone.index.json") + ": shard 'gone.safetensors' (of 'q' and any "
                                                   "other tensor the index puts there): ",
                         0),
              0u)
        << what;
    EXPECT_NE(what.find("gone.safetensors"), std::string::npos) << what;
  }
}

TEST_F(Safetensors, ShardPathsAreResolvedAndComparedByComponent) {
  // "a..b" is a name, not a way out of the folder.
  write_safetensors(path("a..b.safetensors"),
                    {{"x", StDtype::F32, {1}, bytes_of(std::vector<float>{5})}});
  std::ofstream(path("dots.index.json")) << R"({"weight_map": {"x": "a..b.safetensors"}})";
  auto c = Checkpoint::open(path("dots.index.json"));
  EXPECT_EQ(c->to_float(*c->find("x")), std::vector<float>{5});
  std::filesystem::create_directories(dir_ / "sub");
  std::ofstream(path("sub.index.json")) << R"({"weight_map": {"x": "sub/../a..b.safetensors"}})";
  EXPECT_EQ(Checkpoint::open(path("sub.index.json"))->tensors().size(), 1u);

  // A link inside the folder to a file outside it is outside.
  const std::string outside = dir_.string() + "-outside.safetensors";
  write_safetensors(outside, {{"x", StDtype::F32, {1}, bytes_of(std::vector<float>{6})}});
  std::filesystem::create_symlink(outside, dir_ / "link.safetensors");
  std::ofstream(path("link.index.json")) << R"({"weight_map": {"x": "link.safetensors"}})";
  try {
    Checkpoint::open(path("link.index.json"));
    ADD_FAILURE() << "a link out of the folder was followed";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("outside the checkpoint's folder"), std::string::npos)
        << e.what();
  }
  std::ofstream(path("abs.index.json")) << R"({"weight_map": {"x": ")" << outside << R"("}})";
  EXPECT_THROW(Checkpoint::open(path("abs.index.json")), CheckpointError);
  std::remove(outside.c_str());

  std::ofstream(path("twice.index.json"))
      << R"({"weight_map": {"x": "a..b.safetensors", "x": "a..b.safetensors"}})";
  try {
    Checkpoint::open(path("twice.index.json"));
    ADD_FAILURE() << "a tensor named twice was accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'x' appears twice"), std::string::npos) << e.what();
  }
}

TEST_F(Safetensors, FifosAreRefusedNotWaitedOn) {
  for (const char* name : {"fifo.safetensors", "fifo.safetensors.index.json"}) {
    test::FifoGuard fifo(path(name));
    ASSERT_TRUE(fifo.made());
    try {
      Checkpoint::open(fifo.path());
      ADD_FAILURE() << name << ": accepted";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(fifo.path() + " is a FIFO"), std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(fifo.reader_blocked()) << name << ": the reader blocked in open()";
  }
  test::FifoGuard shard(path("shard.safetensors"));
  std::ofstream(path("m.index.json")) << R"({"weight_map": {"x": "shard.safetensors"}})";
  EXPECT_THROW(Checkpoint::open(path("m.index.json")), CheckpointError);
  EXPECT_FALSE(shard.reader_blocked()) << "the reader blocked in open()";
}

std::vector<std::string> listing(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(Safetensors, WritersReplaceOnlyRegularFilesAndLeaveNothingOnFailure) {
  const std::vector<TensorToWrite> t = {
      {"w", StDtype::F32, {2}, bytes_of(std::vector<float>{1, 2})}};
  // A folder: refused before anything is written, no .part left beside it.
  std::filesystem::create_directories(dir_ / "folder");
  try {
    write_safetensors(path("folder"), t);
    ADD_FAILURE() << "wrote over a folder";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("is a folder"), std::string::npos) << e.what();
  }
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"folder"});
  // A FIFO (as a device would be) stays what it is.
  {
    test::FifoGuard fifo(path("fifo"));
    EXPECT_THROW(write_safetensors(fifo.path(), t), CheckpointError);
    struct stat st {};
    ASSERT_EQ(::lstat(fifo.path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  }
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"folder"});
  // A link to a regular file: the file is replaced, the link stays.
  write_safetensors(path("real.safetensors"),
                    {{"w", StDtype::F32, {1}, bytes_of(std::vector<float>{0})}});
  std::filesystem::create_symlink(path("real.safetensors"), dir_ / "link.safetensors");
  write_safetensors(path("link.safetensors"), t);
  EXPECT_TRUE(std::filesystem::is_symlink(dir_ / "link.safetensors"));
  EXPECT_EQ(Checkpoint::open(path("real.safetensors"))->tensors()[0].entry->shape,
            std::vector<int64_t>{2});

  // A full disk (here: a file size limit) leaves the old file as it was, and no .part.
  const std::vector<TensorToWrite> big = {
      {"w", StDtype::F32, {1 << 18}, std::vector<uint8_t>(1 << 20)}};
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 64 << 10;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  EXPECT_THROW(write_safetensors(path("real.safetensors"), big), CheckpointError);
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(Checkpoint::open(path("real.safetensors"))->tensors()[0].entry->shape,
            std::vector<int64_t>{2});
  EXPECT_EQ(listing(dir_),
            (std::vector<std::string>{"folder", "link.safetensors", "real.safetensors"}));

  // A writer that fails half way leaves nothing either.
  EXPECT_THROW(write_file_atomically(path("half.csv"),
                                     [](std::ostream& o) {
                                       o << "step,loss\n";
                                       throw std::runtime_error("the database went away");
                                     }),
               std::runtime_error);
  EXPECT_EQ(listing(dir_),
            (std::vector<std::string>{"folder", "link.safetensors", "real.safetensors"}));
}

// A file image: the 8-byte header length, the header, then `data` bytes.
std::vector<uint8_t> image(const std::string& header, size_t data, uint64_t claimed = 0) {
  std::vector<uint8_t> b(8 + header.size() + data, 0);
  const uint64_t n = claimed ? claimed : header.size();
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

struct Bad {
  const char* name;
  std::vector<uint8_t> bytes;
  const char* must_mention;
};

TEST(SafetensorsBadInput, EveryMalformedFileGivesAClearError) {
  const std::vector<Bad> cases = {
      {"truncated", {1, 2, 3}, "truncated"},
      {"header past the end", image(R"({})", 0, 1000), "past the end"},
      {"cut right after the length", image("", 0, 642),
       "header length 642 runs past the end of the file (8 bytes)"},
      {"huge header", image(R"({})", 0, uint64_t{1} << 40), "100 MB"},
      {"not a safetensors file at all",
       [] {
         const std::string t = "PK\x03\x04 a zip, or some text: not a header length";
         return std::vector<uint8_t>(t.begin(), t.end());
       }(),
       "not a safetensors file"},
      {"not JSON", image("{nope", 0), "JSON"},
      {"not an object", image("[1]", 0), "object"},
      {"unknown dtype", image(R"({"t": {"dtype": "F7", "shape": [1], "data_offsets": [0, 1]}})", 1),
       "'t'"},
      {"shape vs bytes",
       image(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8), "12 bytes"},
      {"end before begin",
       image(R"({"t": {"dtype": "U8", "shape": [0], "data_offsets": [4, 2]}})", 4), "'t'"},
      {"overlap",
       image(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                            "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
             8),
       "overlap"},
      {"negative dim", image(R"({"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}})", 0),
       "'t'"},
      {"absurd shape",
       image(
           R"({"t": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
           8),
       "'t'"},
      {"bad offsets", image(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})", 1),
       "data_offsets"},
      {"offset 2^64",
       image(R"({"t": {"dtype": "U8", "shape": [4],
                        "data_offsets": [18446744073709551612, 18446744073709551616]}})",
             4),
       "data_offsets 1.8446744073709552e+19 is out of range (at most 2^64 - 1)"},
      {"negative offset",
       image(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}})", 1),
       "data_offsets -1 is negative"},
      {"invalid UTF-8", image("{\"\xff\xfe\": {}}", 0), "UTF-8"},
      {"bad metadata", image(R"({"__metadata__": {"a": 1}})", 0), "__metadata__"},
      // Byte counts that wrap around 2^64 (4 x 2^62 = 0) must not pass as empty tensors.
      {"numel x 4 wraps to 0",
       image(R"({"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 0]}})",
             0),
       "'w': shape [4611686018427387904] of F32 is too large"},
      {"2^31 x 2^31 x 4 wraps",
       image(
           R"({"w": {"dtype": "F32", "shape": [2147483648, 2147483648], "data_offsets": [0, 0]}})",
           0),
       "shape [2147483648, 2147483648]"},
      {"dim beyond int64",
       image(R"({"w": {"dtype": "U8", "shape": [18446744073709551615], "data_offsets": [0, 0]}})",
             0),
       "'w'"},
      {"zero dim beside a huge one",
       image(
           R"({"w": {"dtype": "F32", "shape": [0, 4611686018427387904], "data_offsets": [0, 0]}})",
           0),
       "'w'"},
      // An empty tensor between two overlapping ones hides nothing.
      {"overlap behind an empty tensor",
       image(R"({"a": {"dtype": "U8", "shape": [400], "data_offsets": [0, 400]},
                            "e": {"dtype": "U8", "shape": [0], "data_offsets": [200, 200]},
                            "c": {"dtype": "U8", "shape": [40], "data_offsets": [300, 340]}})",
             400),
       "'a' and 'c' overlap at byte 300"},
      {"overlap with a far tensor",
       image(R"({"a": {"dtype": "U8", "shape": [400], "data_offsets": [0, 400]},
                            "b": {"dtype": "U8", "shape": [10], "data_offsets": [10, 20]},
                            "c": {"dtype": "U8", "shape": [40], "data_offsets": [300, 340]}})",
             400),
       "overlap"},
      // Bytes that belong to no tensor (a polyglot file's other contents): the format's
      // loaders refuse them.
      {"a hole between tensors",
       image(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                            "b": {"dtype": "U8", "shape": [4], "data_offsets": [6, 10]}})",
             10),
       "bytes [4, 6) of the data section, before tensor 'b', belong to no tensor"},
      {"a hole before the first tensor",
       image(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})", 6),
       "bytes [0, 2) of the data section, before tensor 'a', belong to no tensor"},
      {"bytes after the last tensor",
       image(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", 7),
       "3 bytes after the last tensor's data belong to no tensor"},
      {"bytes and no tensor", image(R"({})", 5), "5 bytes after the header belong to no tensor"},
      // JSON keeps the last of two equal keys: the first tensor would vanish silently.
      {"duplicate name",
       image(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                            "t": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
             2),
       "tensor 't' appears twice"},
      {"duplicate field",
       image(R"({"t": {"dtype": "U8", "shape": [1], "shape": [2], "data_offsets": [0, 1]}})", 1),
       "'shape' twice"},
  };
  for (const Bad& b : cases) {
    try {
      SafetensorsFile f(b.bytes.data(), b.bytes.size(), "mem.safetensors");
      ADD_FAILURE() << b.name << ": accepted";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(b.must_mention), std::string::npos)
          << b.name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("mem.safetensors"), std::string::npos) << b.name;
    }
  }
  EXPECT_THROW(Checkpoint::open("/nonexistent/model.safetensors"), CheckpointError);
  EXPECT_THROW(write_safetensors("/tmp/x.safetensors", {{"t", StDtype::F32, {2}, {1, 2, 3}}}),
               CheckpointError);
}

TEST_F(Safetensors, Fp8ExportReopensBitIdentically) {
  const std::vector<float> w = gaussian(300 * 200, 7, 0.05f);  // partial blocks both ways
  const std::vector<float> b = gaussian(300, 8);
  write_safetensors(path("model.safetensors"),
                    {{"fc.weight", StDtype::F32, {300, 200}, bytes_of(w)},
                     {"fc.bias", StDtype::F32, {300}, bytes_of(b)}});
  auto c = Checkpoint::open(path("model.safetensors"));
  const ExportReport rep = export_fp8_checkpoint(*c, path("fp8.safetensors"));
  EXPECT_EQ(rep.quantized, std::vector<std::string>{"fc.weight"});
  EXPECT_EQ(rep.kept, std::vector<std::string>{"fc.bias"});
  auto q = Checkpoint::open(path("fp8.safetensors"));
  const auto* codes = q->find("fc.weight");
  const auto* scales = q->find("fc.weight_scale_inv");
  ASSERT_TRUE(codes && scales);
  EXPECT_EQ(codes->entry->dtype, StDtype::F8_E4M3);
  EXPECT_EQ(scales->entry->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(q->tensors()[0].file->metadata().at("weight_block_size"), "128,128");
  // The FP8 values the kernels produce for this recipe, bit for bit.
  QuantRecipe r;
  r.kind = ScalingKind::Block128x128;
  r.partial_blocks = true;
  std::vector<float> want(w.size());
  QuantizeTargets t;
  t.dequant = want.data();
  quantize_current(TensorRef::of(w.data(), 300, 200), r, t);
  const std::vector<float> got = q->to_float(*codes);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * got.size()), 0);
  EXPECT_EQ(q->to_float(*q->find("fc.bias")), b);
  // Exporting the export again changes nothing: FP8 values are fixed points.
  const ExportReport again = export_fp8_checkpoint(*q, path("fp8b.safetensors"));
  EXPECT_TRUE(again.quantized.empty());  // F8 weights are kept as they are
}

// E4M3FN has no Inf: an Inf in a weight is written as the largest finite code of its sign
// (448 x its block's scale_inv), NaN stays NaN, and the report names the weight and counts
// the Infs, so that the CLI can say so.
TEST_F(Safetensors, Fp8ExportReportsTheInfsItMadeFinite) {
  std::vector<float> w = gaussian(64 * 64, 9, 0.05f);
  w[5] = std::numeric_limits<float>::infinity();
  w[700] = -std::numeric_limits<float>::infinity();
  w[900] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> clean = gaussian(32 * 32, 10, 0.05f);
  write_safetensors(path("inf.safetensors"),
                    {{"a.weight", StDtype::F32, {64, 64}, bytes_of(w)},
                     {"b.weight", StDtype::F32, {32, 32}, bytes_of(clean)}});
  auto c = Checkpoint::open(path("inf.safetensors"));
  const ExportReport rep = export_fp8_checkpoint(*c, path("inf8.safetensors"));
  EXPECT_EQ(rep.quantized, (std::vector<std::string>{"a.weight", "b.weight"}));
  EXPECT_EQ(rep.with_inf, std::vector<std::string>{"a.weight"});
  EXPECT_EQ(rep.inf_values, 2);
  auto q = Checkpoint::open(path("inf8.safetensors"));
  const std::vector<float> got = q->to_float(*q->find("a.weight"));
  const std::vector<float> si = q->to_float(*q->find("a.weight_scale_inv"));
  ASSERT_EQ(si.size(), 1u);  // one 64x64 block
  EXPECT_EQ(got[5], 448.0f * si[0]);
  EXPECT_EQ(got[700], -448.0f * si[0]);
  EXPECT_TRUE(std::isnan(got[900]));
}

// A weight whose 128x128 block holds one outlier among values far below it loses them to
// 0: the report names it with the share lost, counted directly here; a plain weight is
// not named. The export keeps the source's metadata beside its own, and says the format
// ("pt") where the source says none.
TEST_F(Safetensors, Fp8ExportNamesWeightsThatLoseValuesAndKeepsTheMetadata) {
  std::vector<float> w = gaussian(128 * 128, 11, 1e-4f);
  w[77] = 1000.0f;
  const std::vector<float> plain = gaussian(64 * 64, 12, 0.05f);
  write_safetensors(path("o.safetensors"),
                    {{"outlier.weight", StDtype::F32, {128, 128}, bytes_of(w)},
                     {"plain.weight", StDtype::F32, {64, 64}, bytes_of(plain)}},
                    {{"format", "pt"}, {"source", "a test"}});
  auto c = Checkpoint::open(path("o.safetensors"));
  const ExportReport rep = export_fp8_checkpoint(*c, path("o8.safetensors"));
  ASSERT_EQ(rep.zeroed.size(), 1u);
  EXPECT_EQ(rep.zeroed[0].first, "outlier.weight");
  auto q = Checkpoint::open(path("o8.safetensors"));
  const std::vector<float> got = q->to_float(*q->find("outlier.weight"));
  int64_t nonzero = 0, lost = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0) continue;
    ++nonzero;
    if (got[i] == 0) ++lost;
  }
  EXPECT_GT(lost, nonzero * 99 / 100);
  EXPECT_NEAR(rep.zeroed[0].second,
              100.0 * static_cast<double>(lost) / static_cast<double>(nonzero), 1e-9);
  const auto& meta = q->tensors()[0].file->metadata();
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("source"), "a test");
  EXPECT_EQ(meta.at("weight_block_size"), "128,128");
  // A source without metadata: the export says its format.
  write_safetensors(path("p.safetensors"),
                    {{"plain.weight", StDtype::F32, {64, 64}, bytes_of(plain)}});
  const ExportReport none =
      export_fp8_checkpoint(*Checkpoint::open(path("p.safetensors")), path("p8.safetensors"));
  EXPECT_TRUE(none.zeroed.empty());
  EXPECT_EQ(Checkpoint::open(path("p8.safetensors"))->tensors()[0].file->metadata().at("format"),
            "pt");
}

TEST(CheckpointAnalysis, FiguresMatchDirectComputationAndTheRecommendationFollowsTheData) {
  // A well-behaved weight: one tensorwise scale is as good as any.
  const std::vector<float> w = gaussian(256 * 256, 3, 0.02f);
  const TensorAnalysis a = analyze_values("w", "F32", {256, 256}, w);
  double mean = 0;
  for (float v : w) mean += v;
  mean /= static_cast<double>(w.size());
  EXPECT_NEAR(a.mean, mean, 1e-9);
  float amax = 0;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(a.amax, static_cast<double>(amax));
  uint64_t hist_total = 0;
  for (uint64_t h : a.log2_hist) hist_total += h;
  EXPECT_EQ(hist_total, w.size());
  EXPECT_EQ(a.recommended, "E4M3FN tensorwise");
  // Every recipe x format that fits, NVFP4 only with E2M1.
  bool nvfp4_e2m1 = false, nvfp4_e4m3 = false;
  for (const auto& r : a.recipes) {
    nvfp4_e2m1 |= r.recipe.kind == ScalingKind::NVFP4 && r.recipe.format == Format::E2M1FN;
    nvfp4_e4m3 |= r.recipe.kind == ScalingKind::NVFP4 && r.recipe.format == Format::E4M3FN;
    EXPECT_TRUE(std::isfinite(r.sqnr_db)) << r.name;
  }
  EXPECT_TRUE(nvfp4_e2m1);
  EXPECT_FALSE(nvfp4_e4m3);

  // Activations with outlier channels: tensorwise loses small values, 1x128 keeps them.
  std::vector<float> x = gaussian(256 * 512, 4, 1.0f);
  for (int64_t r = 0; r < 256; ++r) {
    for (int64_t c : {3L, 300L}) x[static_cast<size_t>(r * 512 + c)] *= 3000.0f;
  }
  const TensorAnalysis o = analyze_values("x", "BF16", {256, 512}, x);
  double tensorwise = 0, block = 0;
  for (const auto& r : o.recipes) {
    if (r.recipe.format != Format::E4M3FN) continue;
    if (r.recipe.kind == ScalingKind::Tensorwise) tensorwise = r.sqnr_db;
    if (r.recipe.kind == ScalingKind::Block1x128) block = r.sqnr_db;
  }
  EXPECT_GT(block, tensorwise);
  EXPECT_NE(o.recommended, "E4M3FN tensorwise");
  EXPECT_NE(o.reason.find("tensorwise"), std::string::npos) << o.reason;
  // Integer tensors are described, not quantized.
  const TensorAnalysis i = analyze_values("ids", "I64", {4}, {1, 2, 3, 4});
  EXPECT_FALSE(i.floating);
  EXPECT_TRUE(i.recipes.empty());
}

TEST(CheckpointAnalysis, NoSignalGivesNoSqnrAndNoRecommendation) {
  // All NaN: nothing finite to measure, so no figure and no recipe to recommend.
  const TensorAnalysis nan =
      analyze_values("n", "F32", {64, 64}, std::vector<float>(64 * 64, std::nanf("")));
  EXPECT_EQ(nan.nan_count, 4096);
  EXPECT_TRUE(nan.recipes.empty());
  EXPECT_TRUE(nan.recommended.empty());
  EXPECT_EQ(nan.not_quantized, "no finite values: 4096 NaN");
  // All zero: no signal power, SQNR undefined.
  const TensorAnalysis zero = analyze_values("z", "F32", {64, 64}, std::vector<float>(64 * 64));
  EXPECT_TRUE(zero.recipes.empty());
  EXPECT_TRUE(zero.recommended.empty());
  EXPECT_EQ(zero.not_quantized, "all zero");
  // Empty.
  const TensorAnalysis empty = analyze_values("e", "F32", {0}, {});
  EXPECT_TRUE(empty.recipes.empty());
  EXPECT_EQ(empty.not_quantized, "empty tensor (0 elements)");
  // Some NaN: the figures are those of the finite values. A zero in place of each NaN
  // adds nothing to signal or error power (it quantizes to 0 exactly), so the same
  // tensor with zeros there is the reference.
  std::vector<float> x = gaussian(64 * 256, 5, 0.5f);
  std::vector<float> zeros = x;
  for (size_t i = 0; i < x.size(); i += 7) {
    x[i] = std::nanf("");
    zeros[i] = 0.0f;
  }
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const TensorAnalysis some = analyze_values("s", "F32", {64, 256}, x, o);
  const TensorAnalysis ref = analyze_values("s", "F32", {64, 256}, zeros, o);
  EXPECT_TRUE(some.not_quantized.empty());
  ASSERT_EQ(some.recipes.size(), ref.recipes.size());
  ASSERT_FALSE(some.recipes.empty());
  for (size_t i = 0; i < some.recipes.size(); ++i) {
    EXPECT_TRUE(std::isfinite(some.recipes[i].sqnr_db)) << some.recipes[i].name;
    EXPECT_NEAR(some.recipes[i].sqnr_db, ref.recipes[i].sqnr_db, 1e-9) << some.recipes[i].name;
  }
  EXPECT_EQ(some.recommended, ref.recommended);
}

// A tensor so small that every E4M3 recipe turns each value into 0 (scales take an amax
// below 1e-12 as 1e-12) is recommended nothing, and it is said why; one that only MX
// scales keep says why tensorwise scaling fails.
TEST(CheckpointAnalysis, NoRecipeIsRecommendedWhereEveryRecipeZeroesTheTensor) {
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const TensorAnalysis tiny = analyze_values("w.tiny", "F32", {2}, {1e-45f, -1e-45f}, o);
  ASSERT_FALSE(tiny.recipes.empty());
  for (const auto& r : tiny.recipes)
    EXPECT_TRUE(r.underflow_pct == 100.0 || std::isnan(r.sqnr_db)) << r.name;
  EXPECT_TRUE(tiny.recommended.empty()) << tiny.recommended;
  EXPECT_EQ(tiny.no_recipe.rfind("no FP8 recipe represents this tensor", 0), 0u) << tiny.no_recipe;
  EXPECT_NE(tiny.no_recipe.find("(amax 1.401e-45: below 1e-12, which the scale formulas take as "
                                "the least amax, so no scale is above 4.48e+14"),
            std::string::npos)
      << tiny.no_recipe;
  EXPECT_EQ(tiny.reason, tiny.no_recipe);
  // A tensor that some recipe keeps is recommended one as before.
  const TensorAnalysis fine = analyze_values("w.fine", "F32", {2}, {0.5f, -0.25f}, o);
  EXPECT_FALSE(fine.recommended.empty());
  EXPECT_TRUE(fine.no_recipe.empty());
  // Values around 2^-130: MX scales (powers of two down to 2^-127) keep them, one tensorwise
  // scale cannot (its amax counts as 1e-12); the reason gives the amax as it is, not as
  // 0.000, and says why tensorwise fails.
  std::vector<float> sub(32 * 32);
  for (size_t i = 0; i < sub.size(); ++i)
    sub[i] = std::ldexp(static_cast<float>(i % 16 + 1), -134) * (i % 2 ? -1.0f : 1.0f);
  const TensorAnalysis small = analyze_values("w.sub", "F32", {32, 32}, sub, o);
  EXPECT_NE(small.recommended.find("mx"), std::string::npos) << small.recommended;
  EXPECT_NE(small.reason.find("one tensorwise scale gives 0.0 dB but turns 100.000% of the "
                              "nonzero values into 0 (amax 7.347e-40 against"),
            std::string::npos)
      << small.reason;
  EXPECT_NE(small.reason.find("an amax below 1e-12 counts as 1e-12 in its scale"),
            std::string::npos)
      << small.reason;
}

// One outlier of 1000 among values near 1e-6: one tensorwise scale keeps the outlier
// exactly and turns every other value into 0, yet its SQNR, carried by the outlier, reads
// above 100 dB. The reason says what it loses beside that figure; a tensor without such
// losses gets no such words.
TEST(CheckpointAnalysis, TheTensorwiseNoteSaysWhatAnOutlierHides) {
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  std::vector<float> v(256 * 256);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 1e-6f * static_cast<float>(i % 7 + 1) * (i % 2 ? -1.0f : 1.0f);
  v[7] = 1000.0f;
  const TensorAnalysis a = analyze_values("w.outlier", "F32", {256, 256}, v, o);
  const auto tw = std::find_if(a.recipes.begin(), a.recipes.end(), [](const RecipeResult& r) {
    return r.recipe.format == Format::E4M3FN && r.recipe.kind == ScalingKind::Tensorwise;
  });
  ASSERT_NE(tw, a.recipes.end());
  EXPECT_GT(tw->sqnr_db, 100.0);
  EXPECT_NE(a.recommended.find("E4M3FN"), std::string::npos);
  EXPECT_EQ(a.recommended.find("tensorwise"), std::string::npos) << a.recommended;
  // The recommendation's scope is named: its format's recipes, not every E4M3 format's.
  EXPECT_EQ(a.reason.rfind("best SQNR of the E4M3FN recipes: ", 0), 0u) << a.reason;
  EXPECT_NE(a.reason.find("; one tensorwise scale gives 1"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find(" dB but turns 99.998% of the nonzero values into 0 (amax 1000 against"),
            std::string::npos)
      << a.reason;
  // Rows 2^(r/2) apart (19.2 bits, wider than E4M3's 18.8 binades from max to half the
  // smallest subnormal): finer scales win, and one tensorwise scale turns the smallest
  // values into 0, fewer than 1% of them but more than the pick does: said.
  const auto rows = [&](float per_row) {
    std::vector<float> w(32 * 32);
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = (static_cast<float>(i % 13) - 6.5f) * std::exp2(static_cast<float>(i / 32) / per_row);
    return analyze_values("w.rows", "F32", {32, 32}, w, o);
  };
  const TensorAnalysis b = rows(2.0f);
  const auto b_tw = std::find_if(b.recipes.begin(), b.recipes.end(), [](const RecipeResult& r) {
    return r.recipe.format == Format::E4M3FN && r.recipe.kind == ScalingKind::Tensorwise;
  });
  ASSERT_NE(b_tw, b.recipes.end());
  ASSERT_GT(b_tw->underflow_pct, kTiedZeroedPct);
  ASSERT_LT(b_tw->underflow_pct, kNamedZeroedPct);
  EXPECT_NE(b.reason.find("; one tensorwise scale gives "), std::string::npos) << b.reason;
  EXPECT_NE(b.reason.find(" dB but turns " + underflow_pct_text(b_tw->underflow_pct) +
                          "% of the nonzero values into 0"),
            std::string::npos)
      << b.reason;
  // Rows 2^(r/3) apart (14 bits): finer scales still win, and one tensorwise scale loses
  // no value to 0: no such words.
  const TensorAnalysis c = rows(3.0f);
  EXPECT_NE(c.reason.find("; one tensorwise scale gives "), std::string::npos) << c.reason;
  EXPECT_EQ(c.reason.find("into 0"), std::string::npos) << c.reason;
}

// Rows 10^-4 to 10^3 apart: one tensorwise scale has the best SQNR by a fraction of a dB
// (the large rows carry it) and turns a third of the values into 0, rowwise none. Within
// 1 dB of the best, the recipe that turns fewer values into 0 is recommended, and the
// reason says so; so with one outlier among values near 1e-6, where rowwise keeps all but
// the rows' smallest.
TEST(CheckpointAnalysis, WithinOneDbTheRecipeThatTurnsFewerValuesIntoZeroIsRecommended) {
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  o.formats = {Format::E4M3FN};
  std::vector<float> v(64 * 128);
  for (size_t i = 0; i < v.size(); ++i) {
    const int row = static_cast<int>(i / 128);
    v[i] = std::pow(10.0f, static_cast<float>(row % 8 - 4)) * (static_cast<float>(i % 29) - 14.3f) /
           7.0f;
  }
  const TensorAnalysis a = analyze_values("w.rows", "F32", {64, 128}, v, o);
  const auto find = [&](const TensorAnalysis& t, ScalingKind k) {
    return *std::find_if(t.recipes.begin(), t.recipes.end(),
                         [&](const RecipeResult& r) { return r.recipe.kind == k; });
  };
  const RecipeResult tw = find(a, ScalingKind::Tensorwise), rw = find(a, ScalingKind::Rowwise);
  // The premise: tensorwise best, rowwise within 1 dB of it, far fewer values turned into 0.
  ASSERT_GE(tw.sqnr_db, rw.sqnr_db);
  ASSERT_LT(tw.sqnr_db - rw.sqnr_db, 1.0);
  ASSERT_GT(tw.underflow_pct, 10.0);
  ASSERT_LT(rw.underflow_pct, 1.0);
  EXPECT_EQ(a.recommended, "E4M3FN rowwise");
  EXPECT_EQ(a.reason.rfind("within 1 dB of the best E4M3FN recipe (E4M3FN tensorwise, ", 0), 0u)
      << a.reason;
  EXPECT_NE(a.reason.find("% underflow) and turns fewer values into 0: "), std::string::npos)
      << a.reason;
  EXPECT_EQ(a.reason.find("one tensorwise scale"), std::string::npos) << a.reason;  // said
  // One outlier of 10^4 among values near 1e-6 (64 x 64): rowwise and tensorwise within a
  // hundredth of a dB of each other; tensorwise turns all but the outlier into 0.
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1e-6f * static_cast<float>(i % 11 + 1) / 11.0f;
  w[100] = 1e4f;
  const TensorAnalysis b = analyze_values("w.outlier", "F32", {64, 64}, w, o);
  EXPECT_EQ(b.recommended.find("tensorwise"), std::string::npos) << b.recommended << b.reason;
  EXPECT_LT(find(b, ScalingKind::Rowwise).underflow_pct, 5.0);
  // Without such losses, the simplest within 1 dB still wins.
  std::vector<float> u(64 * 128);
  for (size_t i = 0; i < u.size(); ++i) u[i] = std::sin(0.37f * static_cast<float>(i));
  EXPECT_EQ(analyze_values("w.plain", "F32", {64, 128}, u, o).recommended, "E4M3FN tensorwise");
}

// Issue 52's weight: 2048 x 512, Gaussian, one row 1150 times the others. Whole-tensor SQNR
// is carried by that row, so one tensorwise scale reads as well as rowwise (31.5 dB both)
// while it turns about half a percent of the other rows' values into 0 and rowwise a
// handful. Within 1 dB of the best, the fewest values turned into 0 decide before the
// simplest recipe: rowwise, and the reason says what tensorwise loses.
TEST(CheckpointAnalysis, AnOutlierRowDoesNotHideWhatTensorwiseTurnsIntoZero) {
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  o.formats = {Format::E4M3FN};
  std::vector<float> w = gaussian(2048 * 512, 52, 0.02f);
  for (size_t c = 0; c < 512; ++c) w[7 * 512 + c] *= 1150.0f;
  const TensorAnalysis a = analyze_values("layers.0.mlp.weight", "F32", {2048, 512}, w, o);
  const auto find = [&](ScalingKind k) {
    return *std::find_if(a.recipes.begin(), a.recipes.end(),
                         [&](const RecipeResult& r) { return r.recipe.kind == k; });
  };
  const RecipeResult tw = find(ScalingKind::Tensorwise), rw = find(ScalingKind::Rowwise);
  std::printf("tensorwise %.3f dB %.5f%%, rowwise %.3f dB %.5f%%\n", tw.sqnr_db, tw.underflow_pct,
              rw.sqnr_db, rw.underflow_pct);
  // The premise, as the finding saw it: both near 31.5 dB and within 1 dB of each other,
  // tensorwise turning about 0.5% of the values into 0 (under the 1% that named it before),
  // rowwise fewer than one in 10^5.
  ASSERT_NEAR(tw.sqnr_db, 31.5, 0.5);
  ASSERT_NEAR(rw.sqnr_db, 31.5, 0.5);
  ASSERT_LT(std::fabs(tw.sqnr_db - rw.sqnr_db), 1.0);
  ASSERT_GT(tw.underflow_pct, 0.4);
  ASSERT_LT(tw.underflow_pct, 0.7);
  ASSERT_GT(rw.underflow_pct, 0.0);
  ASSERT_LT(rw.underflow_pct, 0.001);
  EXPECT_EQ(a.recommended, "E4M3FN rowwise") << a.reason;
  // Why: its figures, the few values rowwise turns into 0 in two significant digits (not
  // as 0.000%), and what tensorwise loses beside its SQNR.
  char rw_text[64], tw_text[96];
  std::snprintf(rw_text, sizeof rw_text, ": %.1f dB, %.2g%% underflow", rw.sqnr_db,
                rw.underflow_pct);
  std::snprintf(
      tw_text, sizeof tw_text,
      "; one tensorwise scale gives %.1f dB but turns %.3f%% of the nonzero values into 0",
      tw.sqnr_db, tw.underflow_pct);
  EXPECT_NE(a.reason.find(rw_text), std::string::npos) << a.reason;
  EXPECT_EQ(a.reason.find("0.000% underflow"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find(tw_text), std::string::npos) << a.reason;
}

// Values m x 2^e (m in 1, 1.25, 1.5, 1.75; e from -14 to 15) and 57344: 30 binades, wider
// than E4M3's, every value exact in E5M2. The best E4M3 recipe still turns a third of
// the values into 0, and the reason says so and names the recipe that keeps them all.
TEST(CheckpointAnalysis, AnE4m3PickThatStillZeroesValuesNamesTheRecipeThatKeepsThem) {
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  std::vector<float> v(64 * 64);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = (1.0f + 0.25f * static_cast<float>(i % 4)) *
           std::exp2(static_cast<float>(static_cast<int>(i / 4 % 30) - 14));
  }
  v[0] = 57344.0f;
  const TensorAnalysis a = analyze_values("w.wide", "F32", {64, 64}, v, o);
  const auto pick = std::find_if(a.recipes.begin(), a.recipes.end(),
                                 [&](const RecipeResult& r) { return r.name == a.recommended; });
  ASSERT_NE(pick, a.recipes.end()) << a.recommended;
  ASSERT_GT(pick->underflow_pct, 10.0);  // the premise: E4M3 cannot keep them
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.3f", pick->underflow_pct);
  EXPECT_NE(a.reason.find("; " + a.recommended + " still turns " + pct +
                          "% of the nonzero values into 0; E5M2 tensorwise turns 0.000% into 0, "
                          "at inf dB"),
            std::string::npos)
      << a.reason;
  // A pick that keeps its values says nothing of the kind.
  std::vector<float> u(64 * 64);
  for (size_t i = 0; i < u.size(); ++i) u[i] = std::sin(0.37f * static_cast<float>(i));
  EXPECT_EQ(analyze_values("w.plain", "F32", {64, 64}, u, o).reason.find("still turns"),
            std::string::npos);
}

// A header of n one-element U8 tensors "t0".."t<n-1>" at bytes 0..n-1, then `extra`.
std::string many_tensors_header(int n, const std::string& extra) {
  std::string h = "{";
  for (int i = 0; i < n; ++i) {
    h += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"U8","shape":[1],)" +
         R"("data_offsets":[)" + std::to_string(i) + "," + std::to_string(i + 1) + "]}";
  }
  return h + extra + "}";
}

// Checking a header takes O(n log n) time in its number of tensors: 50k tensors once
// took half a minute (the JSON parser's duplicate-key callback rescanned the whole
// object after every tensor) and 100k took minutes. Duplicates and overlaps among them
// are still found, and lookups by name still work. The time is compared between 12.5k
// and 50k tensors in the same run (a quadratic check takes 16 times as long, O(n log n)
// about 4.5 times), not against a clock limit that a loaded or sanitized build misses.
TEST(SafetensorsBadInput, HeadersWithManyTensorsAreCheckedQuickly) {
  constexpr int n = 50000;
  const std::vector<uint8_t> good = image(many_tensors_header(n, ""), n);
  const std::vector<uint8_t> quarter = image(many_tensors_header(n / 4, ""), n / 4);
  // One check of a header, in seconds.
  const auto check_time = [](const std::vector<uint8_t>& b) {
    const auto start = std::chrono::steady_clock::now();
    SafetensorsFile f(b.data(), b.size(), "mem.safetensors");
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // The least of five checks of each, taken in turn, so that a stretch of load on a busy
  // machine (ctest -j2 beside other work) slows both sizes alike: three checks of one
  // size after three of the other failed once so.
  double t_quarter = INFINITY, t_full = INFINITY;
  for (int rep = 0; rep < 5; ++rep) {
    t_quarter = std::min(t_quarter, check_time(quarter));
    t_full = std::min(t_full, check_time(good));
  }
  EXPECT_LT(t_full, 9.0 * t_quarter)
      << t_quarter << " s for " << n / 4 << " tensors, " << t_full << " s for " << n;
  SafetensorsFile f(good.data(), good.size(), "mem.safetensors");
  ASSERT_EQ(f.tensors().size(), static_cast<size_t>(n));
  for (int i : {0, 1, 12345, n - 1}) {
    const TensorEntry* e = f.find("t" + std::to_string(i));
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->begin, static_cast<uint64_t>(i));
  }
  EXPECT_EQ(f.find("t50000"), nullptr);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"(,"t7":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})", "tensor 't7' appears twice"},
      {R"(,"u":{"dtype":"U8","shape":[2],"data_offsets":[40000,40002]})", "overlap at byte 40000"},
  };
  for (const auto& [extra, message] : bad) {
    const std::vector<uint8_t> b = image(many_tensors_header(n, extra), n);
    try {
      SafetensorsFile g(b.data(), b.size(), "mem.safetensors");
      ADD_FAILURE() << message << ": accepted";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

// A per-tensor `_scale_inv` ([1] or a scalar) scales the whole FP8 weight; a companion
// of any other shape or dtype that fits no 128x128 blocks is an error naming both
// tensors and shapes, never dropped silently (the raw FP8 values would pass as the
// weight's): to_float() throws it, and the analysis lists the weight with it, no figures,
// and analyses the file's other tensors; a `_scale_inv` beside a tensor that is not FP8, or
// beside none, is analysed as itself with a warning that says so.
TEST_F(Safetensors, PerTensorScaleInvIsAppliedAndAnUnfitOneIsAnError) {
  const std::vector<uint8_t> codes(256 * 256, 0x7e);  // E4M3FN 448
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  o.maps = false;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1}, std::vector<int64_t>{}}) {
    write_safetensors(path("one.safetensors"),
                      {{"w", StDtype::F8_E4M3, {256, 256}, codes},
                       {"w_scale_inv", StDtype::F32, shape, bytes_of(std::vector<float>{2.0f})}});
    const auto c = Checkpoint::open(path("one.safetensors"));
    const std::vector<float> w = c->to_float(*c->find("w"));
    EXPECT_EQ(w.front(), 896.0f);
    EXPECT_EQ(w.back(), 896.0f);
    const auto a = analyze_checkpoint(*c, o);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].amax, 896.0);
  }
  write_safetensors(path("three.safetensors"),
                    {{"w", StDtype::F8_E4M3, {256, 256}, codes},
                     {"w_scale_inv", StDtype::F32, {3}, bytes_of(std::vector<float>{2, 2, 2})},
                     {"v", StDtype::F8_E4M3, {256, 256}, codes},
                     {"v_scale_inv", StDtype::F32, {3, 2}, bytes_of(std::vector<float>(6, 2.0f))},
                     {"b", StDtype::F32, {4}, bytes_of(std::vector<float>{1, 2, 3, 4})}});
  const auto c = Checkpoint::open(path("three.safetensors"));
  try {
    c->to_float(*c->find("w"));
    FAIL() << "a [3] scale_inv was dropped silently";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'w_scale_inv' (F32 [3])"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'w' [256, 256]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c->to_float(*c->find("v")), CheckpointError);
  const auto all = analyze_checkpoint(*c, o);
  ASSERT_EQ(all.size(), 3u);  // the two weights (their companions folded in) and b
  for (const auto& a : all) {
    SCOPED_TRACE(a.name);
    if (a.name == "b") {
      EXPECT_EQ(a.amax, 4.0);
      EXPECT_TRUE(a.not_quantized.empty()) << a.not_quantized;
      EXPECT_FALSE(a.recipes.empty());
      continue;
    }
    EXPECT_EQ(a.numel, 256 * 256);
    EXPECT_TRUE(a.recipes.empty());
    EXPECT_TRUE(a.recommended.empty());
    EXPECT_EQ(a.amax, 0.0);
    const std::string want =
        a.name == "w" ? "'w_scale_inv' (F32 [3]) is neither one F32 scale"
                      : "'v_scale_inv' [3, 2] is not [2, 2], the 128x128 blocks of 'v' [256, 256]";
    EXPECT_EQ(a.not_quantized.rfind("values unknown: ", 0), 0u) << a.not_quantized;
    EXPECT_NE(a.not_quantized.find(want), std::string::npos) << a.not_quantized;
  }
  write_safetensors(path("f32.safetensors"),
                    {{"w", StDtype::F32, {2}, bytes_of(std::vector<float>{1, 2})},
                     {"w_scale_inv", StDtype::F32, {1}, bytes_of(std::vector<float>{2})}});
  const auto f = Checkpoint::open(path("f32.safetensors"));
  const auto both = analyze_checkpoint(*f, o);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_TRUE(both[0].warnings.empty());
  ASSERT_EQ(both[1].warnings.size(), 1u);
  EXPECT_EQ(
      both[1].warnings[0],
      "'w_scale_inv' scales no FP8 tensor: 'w' is F32, not FP8; shown as a tensor of its own");
  write_safetensors(path("alone.safetensors"),
                    {{"y_scale_inv", StDtype::F32, {1}, bytes_of(std::vector<float>{2})}});
  const auto alone = analyze_checkpoint(*Checkpoint::open(path("alone.safetensors")), o);
  ASSERT_EQ(alone.size(), 1u);
  ASSERT_EQ(alone[0].warnings.size(), 1u);
  EXPECT_NE(alone[0].warnings[0].find("the checkpoint has no tensor 'y'"), std::string::npos);
}

// BOOL bytes read as 0 and 1 (not as byte values: 0x80 is no 128); any byte other than
// 0 or 1 is refused, naming the tensor and the element; the analysis lists that tensor
// with the reason and analyses the others.
TEST_F(Safetensors, BoolTensorsReadAsZeroAndOne) {
  write_safetensors(path("b.safetensors"), {{"b", StDtype::BOOL, {3}, {0, 1, 1}},
                                            {"x", StDtype::BOOL, {3}, {0, 1, 0x80}}});
  const auto c = Checkpoint::open(path("b.safetensors"));
  EXPECT_EQ(c->to_float(*c->find("b")), (std::vector<float>{0, 1, 1}));
  try {
    c->to_float(*c->find("x"));
    FAIL() << "a BOOL byte 0x80 was read";
  } catch (const TensorValueError& e) {
    EXPECT_NE(std::string(e.what()).find("BOOL tensor 'x' holds byte 128 at element 2"),
              std::string::npos)
        << e.what();
  }
  // The analysis lists x with the reason and no figures, and describes b.
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const auto all = analyze_checkpoint(*c, o);
  ASSERT_EQ(all.size(), 2u);
  for (const auto& a : all) {
    SCOPED_TRACE(a.name);
    EXPECT_EQ(a.values_known, a.name == "b");
    EXPECT_EQ(a.has_figures(), a.name == "b");
    if (a.name == "b") {
      EXPECT_EQ(a.amax, 1.0);
      EXPECT_EQ(a.not_quantized,
                "a BOOL tensor: FP8 holds floating-point values, so its values are described, "
                "not quantized");
    } else {
      EXPECT_NE(a.not_quantized.find("values unknown: "), std::string::npos) << a.not_quantized;
      EXPECT_NE(a.not_quantized.find("holds byte 128 at element 2"), std::string::npos)
          << a.not_quantized;
    }
  }
}

// An FP8 weight whose `_scale_inv` blocks are NaN, Inf, zero or negative gets a warning
// naming them; the NaN and Inf of its values are then explained.
TEST_F(Safetensors, BadScaleInvBlocksAreWarnedOf) {
  const std::vector<uint8_t> ones(256 * 256, 0x38);  // E4M3FN 1.0
  auto f32 = [](const std::vector<float>& v) { return bytes_of(v); };
  write_safetensors(
      path("scales.safetensors"),
      {{"l.weight", StDtype::F8_E4M3, {256, 256}, ones},
       {"l.weight_scale_inv", StDtype::F32, {2, 2}, f32({std::nanf(""), -1.0f, 0.0f, INFINITY})},
       {"m.weight", StDtype::F8_E4M3, {256, 256}, ones},
       {"m.weight_scale_inv", StDtype::F32, {2, 2}, f32({0.5f, 1.0f, 2.0f, 0.25f})}});
  const auto ckpt = Checkpoint::open(path("scales.safetensors"));
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  o.maps = false;
  const std::vector<TensorAnalysis> all = analyze_checkpoint(*ckpt, o);
  ASSERT_EQ(all.size(), 2u);
  for (const auto& a : all) {
    if (a.name == "l.weight") {
      EXPECT_EQ(a.nan_count, 128 * 128);
      EXPECT_EQ(a.inf_count, 128 * 128);
      ASSERT_EQ(a.warnings.size(), 1u);
      const std::string& w = a.warnings[0];
      EXPECT_NE(w.find("'l.weight_scale_inv': 4 of 4 blocks (1 NaN, 1 Inf, 1 zero, 1 negative)"),
                std::string::npos)
          << w;
      EXPECT_NE(w.find("[0,0] = nan, [0,1] = -1, [1,0] = 0, [1,1] = inf"), std::string::npos) << w;
    } else {
      EXPECT_TRUE(a.warnings.empty()) << a.warnings[0];
    }
  }
}

TEST(CheckpointAnalysis, SummaryMatchesFp64Recomputation) {
  std::vector<float> x = gaussian(300 * 257, 11, 5.0f);
  x[7] = 0.0f;
  x[8] = -0.0f;
  x[9] = std::numeric_limits<float>::quiet_NaN();
  x[10] = -std::numeric_limits<float>::infinity();
  x[11] = std::numeric_limits<float>::denorm_min();  // the lowest bin, 2^-149
  x[12] = 1e30f;                                     // 2^99, far above 2^23
  x[15] = 3e38f;                                     // the highest bin, 2^127
  x[16] = 1e-40f;                                    // a subnormal: 2^-133
  x[13] = -2.0f;                                     // exactly a power of two
  x[14] = std::nextafter(2.0f, 0.0f);                // just below one
  for (int threads : {1, 0}) {
    AnalysisOptions o;
    o.threads = threads;
    o.device = AnalysisDevice::Cpu;
    const TensorAnalysis a = analyze_values("x", "F32", {300, 257}, x, o);
    double sum = 0, sq = 0, mn = INFINITY, mx = -INFINITY, amax = 0, min_nz = INFINITY;
    // A bin for every fp32 exponent: no value is counted anywhere but at its own.
    std::vector<uint64_t> hist(kValueHistBins, 0);
    int64_t finite = 0;
    for (float f : x) {
      const double v = f;
      if (!std::isfinite(v)) {
        hist[kValueHistNonfiniteBin]++;
        continue;
      }
      ++finite;
      sum += v;
      sq += v * v;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
      amax = std::max(amax, std::fabs(v));
      if (v == 0) {
        hist[kValueHistZeroBin]++;
        continue;
      }
      min_nz = std::min(min_nz, std::fabs(v));
      const int e = static_cast<int>(std::floor(std::log2(std::fabs(v))));
      ASSERT_GE(e, kValueHistMinExp);
      ASSERT_LE(e, kValueHistMaxExp);
      hist[static_cast<size_t>(e - kValueHistMinExp)]++;
    }
    const double mean = sum / static_cast<double>(finite);
    EXPECT_NEAR(a.mean, mean, 1e-12 * std::fabs(mean)) << threads;
    EXPECT_NEAR(a.std, std::sqrt(sq / static_cast<double>(finite) - mean * mean), 1e-9 * a.std);
    EXPECT_EQ(a.min, mn);
    EXPECT_EQ(a.max, mx);
    EXPECT_EQ(a.amax, amax);
    EXPECT_EQ(a.min_nonzero, min_nz);
    EXPECT_EQ(a.log2_hist, hist) << threads;
    EXPECT_NEAR(a.dynamic_range_bits, std::log2(amax) - std::log2(min_nz), 1e-12);
  }
}

TEST(CheckpointAnalysis, EachRecipeGivesWhatQuantizeCurrentGives) {
  // The analysis shares one amax pass between the formats of a kind; its figures must
  // be those of a separate current-scaling quantization per recipe.
  std::vector<float> x = gaussian(200 * 384, 12, 0.5f);
  for (int64_t r = 0; r < 200; ++r) x[static_cast<size_t>(r * 384 + 5)] *= 500.0f;
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const TensorAnalysis a = analyze_values("x", "F32", {200, 384}, x, o);
  ASSERT_GT(a.recipes.size(), 20u);
  StatsOptions so;
  so.histogram = false;
  for (const RecipeResult& r : a.recipes) {
    const CurrentQuantization q =
        quantize_current(TensorRef::of(x.data(), 200, 384), r.recipe, {}, so);
    EXPECT_EQ(r.sqnr_db, q.result.stats.sqnr_db()) << r.name;
    EXPECT_EQ(r.underflow_pct, q.result.stats.underflow_pct()) << r.name;
    EXPECT_EQ(r.saturated_pct, q.result.stats.saturated_pct()) << r.name;
    EXPECT_EQ(r.map_rel_error, q.result.stats.map_rel_error()) << r.name;
  }
}

// A block of the error map without finite nonzero values (all NaN, all zero) has no
// relative error: NaN, not 0 (which would read as a block FP8 holds exactly); the other
// blocks keep theirs, as an fp64 recomputation of the 128x128 recipe gives them.
TEST(CheckpointAnalysis, BlocksWithoutSignalHaveNoRelativeError) {
  std::vector<float> x = gaussian(256 * 256, 5, 0.1f);
  for (int64_t r = 0; r < 128; ++r) {
    for (int64_t c = 0; c < 128; ++c) {
      x[static_cast<size_t>(r * 256 + c)] = std::numeric_limits<float>::quiet_NaN();
      x[static_cast<size_t>(r * 256 + c + 128)] = 0.0f;
    }
  }
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const TensorAnalysis a = analyze_values("x", "F32", {256, 256}, x, o);
  const RecipeResult* blocks = nullptr;
  for (const RecipeResult& r : a.recipes) {
    if (r.recipe.kind == ScalingKind::Block128x128 && r.recipe.format == Format::E4M3FN)
      blocks = &r;
  }
  ASSERT_NE(blocks, nullptr);
  ASSERT_EQ(blocks->map_rel_error.size(), 4u);
  EXPECT_TRUE(std::isnan(blocks->map_rel_error[0]));
  EXPECT_TRUE(std::isnan(blocks->map_rel_error[1]));
  const CodecSpec s = codec_spec(Format::E4M3FN);
  for (size_t cell = 2; cell < 4; ++cell) {
    const int64_t c0 = cell == 2 ? 0 : 128;
    double amax = 0, err = 0, sum = 0;
    for (int64_t r = 128; r < 256; ++r)
      for (int64_t c = c0; c < c0 + 128; ++c)
        amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(r * 256 + c)])));
    const auto scale = static_cast<float>(448.0 / amax);
    for (int64_t r = 128; r < 256; ++r) {
      for (int64_t c = c0; c < c0 + 128; ++c) {
        const float v = x[static_cast<size_t>(r * 256 + c)];
        const float back = decode(encode(v * scale, s, Overflow::Saturate), s) * (1.0f / scale);
        err += (static_cast<double>(v) - back) * (static_cast<double>(v) - back);
        sum += static_cast<double>(v) * v;
      }
    }
    EXPECT_NEAR(blocks->map_rel_error[cell], std::sqrt(err / sum), 1e-6) << cell;
    EXPECT_GT(blocks->map_rel_error[cell], 0.0f);
  }
}

// A recipe's typical block: the SQNR of its blocks' median relative error, over those with
// signal; where outlier channels carry the tensor's SQNR, most blocks get far less.
TEST(CheckpointAnalysis, TheMedianBlockSqnrIsThatOfTheTypicalBlock) {
  RecipeResult r;
  EXPECT_TRUE(std::isnan(median_block_sqnr(r).median_db));  // no map
  EXPECT_EQ(median_block_sqnr(r).blocks, 0u);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  r.map_rel_error = {0.1f, nan, 0.001f, 0.01f, nan};
  BlockSqnr b = median_block_sqnr(r);
  EXPECT_EQ(b.blocks, 3u);
  EXPECT_NEAR(b.median_db, 40.0, 1e-5);              // 0.01: -20 log10
  r.map_rel_error = {0.1f, 0.001f, 0.01f, 0.0001f};  // even: the mean of 0.001 and 0.01
  EXPECT_NEAR(median_block_sqnr(r).median_db,
              -20.0 * std::log10(0.5 * (static_cast<double>(0.001f) + static_cast<double>(0.01f))),
              1e-9);
  r.map_rel_error = {0.0f, 0.0f, 0.5f};  // exact blocks
  EXPECT_EQ(median_block_sqnr(r).median_db, INFINITY);
  r.map_rel_error = {nan, nan};
  EXPECT_EQ(median_block_sqnr(r).blocks, 0u);
  EXPECT_TRUE(std::isnan(median_block_sqnr(r).median_db));

  // Values near 1e-3 with a few at 1e3: one tensorwise scale keeps the outliers (a high
  // SQNR), and turns most blocks' small values into coarse codes or 0.
  std::vector<float> x = gaussian(256 * 256, 11, 1e-3f);
  for (int64_t k = 0; k < 4; ++k) x[static_cast<size_t>(k * 16411)] = 1000.0f;
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const TensorAnalysis a = analyze_values("x", "F32", {256, 256}, x, o);
  const RecipeResult* tw = nullptr;
  for (const RecipeResult& e : a.recipes)
    if (e.recipe.kind == ScalingKind::Tensorwise && e.recipe.format == Format::E4M3FN) tw = &e;
  ASSERT_NE(tw, nullptr);
  b = median_block_sqnr(*tw);
  EXPECT_EQ(b.blocks, tw->map_rel_error.size());
  EXPECT_GT(b.blocks, 16u);
  EXPECT_GT(tw->sqnr_db, 25.0);
  EXPECT_LT(b.median_db, tw->sqnr_db - 20.0) << b.median_db << " against " << tw->sqnr_db;
}

TEST_F(Safetensors, TensorsReadInPlaceGiveTheFiguresOfTheirFp32Values) {
  // bf16 and fp32 are analysed where the file maps them; f16 through a conversion. All
  // must equal the analysis of the same values as an fp32 vector.
  const int64_t rows = 130, cols = 200;
  std::vector<float> v = gaussian(static_cast<size_t>(rows * cols), 13, 0.1f);
  std::vector<uint16_t> bf16(v.size()), f16(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &v[i], 4);
    bf16[i] = static_cast<uint16_t>(b >> 16);
    f16[i] = 0x3C00;  // 1.0
  }
  f16[3] = 0xC000;  // -2
  write_safetensors(path("m.safetensors"), {{"a.bf16", StDtype::BF16, {rows, cols}, bytes_of(bf16)},
                                            {"b.f32", StDtype::F32, {rows, cols}, bytes_of(v)},
                                            {"c.f16", StDtype::F16, {rows, cols}, bytes_of(f16)}});
  auto c = Checkpoint::open(path("m.safetensors"));
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const auto all = analyze_checkpoint(*c, o);
  ASSERT_EQ(all.size(), 3u);
  for (const TensorAnalysis& a : all) {
    const TensorAnalysis want =
        analyze_values(a.name, a.dtype, a.shape, c->to_float(*c->find(a.name)), o);
    EXPECT_EQ(a.mean, want.mean) << a.name;
    EXPECT_EQ(a.amax, want.amax) << a.name;
    EXPECT_EQ(a.log2_hist, want.log2_hist) << a.name;
    ASSERT_EQ(a.recipes.size(), want.recipes.size());
    for (size_t i = 0; i < a.recipes.size(); ++i) {
      EXPECT_EQ(a.recipes[i].sqnr_db, want.recipes[i].sqnr_db)
          << a.name << " " << a.recipes[i].name;
      EXPECT_EQ(a.recipes[i].map_rel_error, want.recipes[i].map_rel_error) << a.name;
    }
  }
  EXPECT_EQ(all[2].min, -2.0);
  EXPECT_EQ(all[2].max, 1.0);
}

TEST(CheckpointAnalysis, AskingForAGpuWithoutOneIsAClearError) {
  if (analysis_gpu_available()) GTEST_SKIP() << "a GPU is here: tests/gpu compares the two";
  AnalysisOptions o;
  o.device = AnalysisDevice::Gpu;
  try {
    analyze_values("w", "F32", {2, 2}, {1, 2, 3, 4}, o);
    FAIL() << "no error without a GPU";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
  o.device = AnalysisDevice::Auto;  // falls back to the CPU
  EXPECT_EQ(analyze_values("w", "F32", {2, 2}, {1, 2, 3, 4}, o).amax, 4.0);
}

}  // namespace
}  // namespace fp8wb
