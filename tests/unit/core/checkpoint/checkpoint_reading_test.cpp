// Reading checkpoints safely: a file truncated between open and read gives an error
// naming the file and the tensor (tensor bytes are read with pread, never through a
// memory map, which would end the process with SIGBUS); a file cut short before it was
// opened lists every tensor and analyses those it holds; files are recognised by what
// they hold, not by their names; NaN and Inf are counted, not folded into the figures;
// MX scales (F8_E8M0) and unsigned integers are read as their values.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>

#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/core/checkpoint/open_checkpoint.h"
#include "fp8wb/core/checkpoint/safetensors.h"
#include "temp_dir_test.h"

namespace fp8wb {
namespace {

class CheckpointReading : public test::TempDirTest {
 protected:
  CheckpointReading() : TempDirTest("fp8wb-ckpt-read") {}
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(no error)";
}

// Two tensors of 64 KiB each; the file is cut inside the second after it was opened.
TEST_F(CheckpointReading, ATruncatedFileGivesAnErrorNotSigbus) {
  const std::string p = path("model.safetensors");
  const std::vector<float> a(128 * 128, 0.5f), b(128 * 128, -0.25f);
  write_safetensors(p, {{"first", StDtype::F32, {128, 128}, f32_bytes(a)},
                        {"second", StDtype::F32, {128, 128}, f32_bytes(b)}});
  const auto ckpt = open_any_checkpoint(p);
  const auto full = std::filesystem::file_size(p);
  // Cut 4 KiB before the end: the second tensor's last page is gone.
  ASSERT_EQ(::truncate(p.c_str(), static_cast<off_t>(full - 4096)), 0);
  const std::string err = error_of([&] { analyze_checkpoint(*ckpt); });
  EXPECT_NE(err.find(p), std::string::npos) << err;
  EXPECT_NE(err.find("'second'"), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  // The first tensor still reads, with its values.
  EXPECT_EQ(ckpt->to_float(*ckpt->find("first")), a);
  const std::string conv = error_of([&] { ckpt->to_float(*ckpt->find("second")); });
  EXPECT_NE(conv.find("'second'"), std::string::npos) << conv;
  // Cut to nothing: every tensor says so.
  ASSERT_EQ(::truncate(p.c_str(), 0), 0);
  const std::string none = error_of([&] { ckpt->to_float(*ckpt->find("first")); });
  EXPECT_NE(none.find("'first'"), std::string::npos) << none;
  EXPECT_NE(none.find("0 bytes now"), std::string::npos) << none;
}

// A download cut short: the header names four tensors, the file ends inside the third.
// The file opens, every tensor is listed, the two whose bytes are all there are analysed,
// and the other two are listed with the reason; so for the file on disk and for its image
// in memory (read without going past its end).
TEST_F(CheckpointReading, AFileCutShortListsEveryTensorAndAnalysesThoseItHolds) {
  const std::string p = path("cut.safetensors");
  const std::vector<float> a = {1, -2, 3, -4}, c(128 * 128, 0.5f);
  const std::vector<uint8_t> b = {0x80, 0x3F, 0x00, 0xC1};  // bf16 1, -8
  write_safetensors(p, {{"a", StDtype::F32, {4}, f32_bytes(a)},
                        {"b", StDtype::BF16, {2}, b},
                        {"c", StDtype::F32, {128, 128}, f32_bytes(c)},
                        {"d", StDtype::F32, {4}, f32_bytes(a)}});
  const auto full = std::filesystem::file_size(p);
  ASSERT_EQ(::truncate(p.c_str(), static_cast<off_t>(full - 1000)), 0);
  std::ifstream in(p, std::ios::binary);
  std::vector<uint8_t> image((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  for (const auto& ckpt : {open_any_checkpoint(p), Checkpoint::from_image(image, "cut image")}) {
    SCOPED_TRACE(ckpt->path());
    ASSERT_EQ(ckpt->tensors().size(), 4u);
    EXPECT_EQ(ckpt->to_float(*ckpt->find("a")), a);
    EXPECT_EQ(ckpt->to_float(*ckpt->find("b")), (std::vector<float>{1, -8}));
    EXPECT_FALSE(ckpt->find("b")->entry->cut_off);
    EXPECT_TRUE(ckpt->find("c")->entry->cut_off);
    EXPECT_TRUE(ckpt->find("d")->entry->cut_off);
    try {
      ckpt->to_float(*ckpt->find("c"));
      FAIL() << "the cut tensor was read";
    } catch (const TensorValueError& e) {
      EXPECT_NE(std::string(e.what()).find("tensor 'c': its bytes"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("run past the end of the file (" +
                                           std::to_string(full - 1000) +
                                           " bytes): the file is truncated"),
                std::string::npos)
          << e.what();
    }
    const auto all = analyze_checkpoint(*ckpt, o);
    ASSERT_EQ(all.size(), 4u);
    for (const TensorAnalysis& t : all) {
      SCOPED_TRACE(t.name);
      EXPECT_EQ(t.values_known, t.name == "a" || t.name == "b");
      if (!t.values_known) {
        EXPECT_EQ(t.numel, t.name == "c" ? 128 * 128 : 4);
        EXPECT_FALSE(t.has_figures());
        // How much of it the file holds, without the file's name (said once by those who
        // list the tensors): c loses its last 984 bytes, d its 16.
        EXPECT_EQ(t.not_quantized, t.name == "c" ? "values unknown: cut off by the end of the "
                                                   "file (64552 of its 65536 bytes there)"
                                                 : "values unknown: cut off by the end of the "
                                                   "file (none of its 16 bytes there)");
      } else {
        EXPECT_EQ(t.amax, t.name == "a" ? 4.0 : 8.0);
      }
    }
  }
}

// A sharded set with one shard cut short: its tensor's reason names that shard (the set's
// path is the index, which says nothing of where the bytes ran out).
TEST_F(CheckpointReading, ATensorCutOffInAShardNamesTheShard) {
  const std::vector<float> a = {1, 2}, b(64, 0.25f);
  write_safetensors(path("a.safetensors"), {{"x", StDtype::F32, {2}, f32_bytes(a)}});
  write_safetensors(path("b.safetensors"), {{"y", StDtype::F32, {64}, f32_bytes(b)}});
  std::ofstream(path("set.index.json"))
      << R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})";
  const auto full = std::filesystem::file_size(path("b.safetensors"));
  ASSERT_EQ(::truncate(path("b.safetensors").c_str(), static_cast<off_t>(full - 56)), 0);
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const auto ckpt = open_any_checkpoint(path("set.index.json"));
  const auto all = analyze_checkpoint(*ckpt, o);
  ASSERT_EQ(all.size(), 2u);
  for (const TensorAnalysis& t : all) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.values_known, t.name == "x");
    if (t.name == "y")
      EXPECT_EQ(t.not_quantized,
                "values unknown: cut off by the end of shard b.safetensors (200 of its 256 bytes "
                "there)");
  }
}

// The errors carry their parts (#51: structured errors): the file, what is wrong with it
// without the path, and where that is about one byte, its offset; what() is the whole
// message as the CLI prints it.
TEST_F(CheckpointReading, ErrorsCarryTheFileAndTheReasonApart) {
  std::ofstream(path("tiny.safetensors")) << "tiny";
  try {
    open_any_checkpoint(path("tiny.safetensors"));
    FAIL() << "a 4-byte file opened";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.path, path("tiny.safetensors"));
    EXPECT_EQ(std::string(e.what()), e.path + ": " + e.reason);
    EXPECT_EQ(e.reason.find(e.path), std::string::npos) << e.reason;
    EXPECT_NE(e.reason.find("truncated"), std::string::npos) << e.reason;
  }
  // A missing file: the reader's own words ("cannot open PATH: ...") and the parts.
  try {
    open_any_checkpoint(path("missing.safetensors"));
    FAIL() << "a missing file opened";
  } catch (const PathError& e) {
    EXPECT_EQ(e.path, path("missing.safetensors"));
    EXPECT_EQ(e.offset, -1);
    EXPECT_NE(std::string(e.what()).find(e.path), std::string::npos) << e.what();
    EXPECT_EQ(e.reason.find(e.path), std::string::npos) << e.reason;
  }
  // A FIFO is refused by kind, its path kept apart.
  ASSERT_EQ(::mkfifo(path("pipe.safetensors").c_str(), 0600), 0);
  try {
    open_any_checkpoint(path("pipe.safetensors"));
    FAIL() << "a FIFO opened";
  } catch (const PathError& e) {
    EXPECT_EQ(e.path, path("pipe.safetensors"));
    EXPECT_EQ(e.reason, "is a FIFO, not a regular file");
  }
  // A shard's error is the index's, its reason naming the shard and what is wrong there.
  write_safetensors(path("a.safetensors"), {{"x", StDtype::F32, {2}, f32_bytes({1, 2})}});
  std::ofstream(path("b.safetensors")) << "tiny";
  std::ofstream(path("set.index.json"))
      << R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})";
  try {
    open_any_checkpoint(path("set.index.json"));
    FAIL() << "a set with a 4-byte shard opened";
  } catch (const PathError& e) {
    EXPECT_EQ(e.path, path("set.index.json"));
    EXPECT_EQ(e.reason.rfind("shard 'b.safetensors'", 0), 0u) << e.reason;
    EXPECT_NE(e.reason.find("truncated"), std::string::npos) << e.reason;
    EXPECT_EQ(e.reason.find(e.path), std::string::npos) << e.reason;
  }
}

// A header may claim a cut-off tensor of any size (here 2^42 bytes of F32 in a file of a
// few hundred): it is listed as cut off, and no buffer of that size is ever asked for
// (the analysis would end with std::bad_alloc, or take the machine's memory).
TEST_F(CheckpointReading, ACutOffTensorOfAnySizeIsNeverAllocated) {
  std::vector<uint8_t> img = safetensors_image({{"t", StDtype::U8, {1}, {0}}});
  const std::string h =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("huge":{"dtype":"F32","shape":[1099511627776],"data_offsets":[8,4398046511112]},)"
      R"("far":{"dtype":"BF16","shape":[1099511627776],"data_offsets":[4398046511112,)"
      R"(6597069766664]},"f16":{"dtype":"F16","shape":[1099511627776],)"
      R"("data_offsets":[6597069766664,8796093022216]}})";
  img.assign(8 + h.size() + 8, 0);
  const uint64_t n = h.size();
  std::memcpy(img.data(), &n, 8);
  std::memcpy(img.data() + 8, h.data(), h.size());
  const float one = 1.0f;
  std::memcpy(img.data() + 8 + h.size(), &one, 4);
  const auto ckpt = Checkpoint::from_image(img, "claims");
  ASSERT_EQ(ckpt->tensors().size(), 4u);
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const auto all = analyze_checkpoint(*ckpt, o);
  ASSERT_EQ(all.size(), 4u);
  for (const TensorAnalysis& t : all) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.values_known, t.name == "a");
    if (t.name == "huge")
      EXPECT_EQ(t.not_quantized,
                "values unknown: cut off by the end of the file (none of its "
                "4398046511104 bytes there)");
    if (t.name == "far")  // offsets far past the file's end: counted without wrapping around
      EXPECT_EQ(t.not_quantized,
                "values unknown: cut off by the end of the file (none of its "
                "2199023255552 bytes there)");
  }
  for (const char* name : {"huge", "far", "f16"}) {
    EXPECT_THROW(ckpt->to_float(*ckpt->find(name)), TensorValueError) << name;
    EXPECT_THROW(ckpt->find(name)->file->bytes(*ckpt->find(name)->entry), TensorValueError);
  }
  // Read on its own, the tensor's error names the file, the tensor and where it runs out.
  try {
    ckpt->to_float(*ckpt->find("huge"));
    ADD_FAILURE() << "the cut tensor was read";
  } catch (const TensorValueError& e) {
    EXPECT_NE(std::string(e.what()).find("claims: tensor 'huge': its bytes [8, 4398046511112) of "
                                         "the data section, which starts at byte " +
                                         std::to_string(8 + h.size()) + ", run past the end"),
              std::string::npos)
        << e.what();
  }
}

// F8_E8M0 (the scales of MX checkpoints: 2^(byte - 127), 0xFF NaN) and the unsigned
// integers are read as their values, integers described with the reason they are not
// quantized; F64 values beyond fp32 are warned of; a dtype the workbench does not read is
// named with those it does.
TEST_F(CheckpointReading, MxScalesAndUnsignedIntegersAreRead) {
  const std::string p = path("mx.safetensors");
  const std::vector<uint16_t> u16 = {0, 7, 65535};
  const std::vector<uint32_t> u32 = {0, 7, 4294967295u};
  const std::vector<uint64_t> u64 = {0, 7, 18446744073709551615ull};
  const auto raw = [](const auto& v) {
    std::vector<uint8_t> out(v.size() * sizeof(v[0]));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  write_safetensors(p,
                    {{"scales", StDtype::F8_E8M0, {7}, {0, 1, 126, 127, 128, 254, 255}},
                     {"u16", StDtype::U16, {3}, raw(u16)},
                     {"u32", StDtype::U32, {3}, raw(u32)},
                     {"u64", StDtype::U64, {3}, raw(u64)},
                     {"f64", StDtype::F64, {4}, raw(std::vector<double>{1e300, -2, 0.5, -4e39})}});
  const auto ckpt = open_any_checkpoint(p);
  const std::vector<float> s = ckpt->to_float(*ckpt->find("scales"));
  ASSERT_EQ(s.size(), 7u);
  EXPECT_EQ(s[0], 0x1p-127f);
  EXPECT_EQ(s[1], 0x1p-126f);
  EXPECT_EQ(s[2], 0.5f);
  EXPECT_EQ(s[3], 1.0f);
  EXPECT_EQ(s[4], 2.0f);
  EXPECT_EQ(s[5], 0x1p127f);
  EXPECT_TRUE(std::isnan(s[6]));
  EXPECT_EQ(ckpt->to_float(*ckpt->find("u16")), (std::vector<float>{0, 7, 65535}));
  EXPECT_EQ(ckpt->to_float(*ckpt->find("u32")), (std::vector<float>{0, 7, 0x1p32f}));
  EXPECT_EQ(ckpt->to_float(*ckpt->find("u64")), (std::vector<float>{0, 7, 0x1p64f}));
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const auto all = analyze_checkpoint(*ckpt, o);
  ASSERT_EQ(all.size(), 5u);
  for (const TensorAnalysis& t : all) {
    SCOPED_TRACE(t.name);
    if (t.name == "scales") {
      EXPECT_EQ(t.dtype, "F8_E8M0");
      EXPECT_EQ(t.amax, 0x1p127);
      EXPECT_EQ(t.nan_count, 1);
    } else if (t.name == "f64") {
      // Finite F64 values beyond fp32 count as Inf, and a warning says so.
      EXPECT_EQ(t.inf_count, 2);
      EXPECT_EQ(t.amax, 2.0);
      ASSERT_EQ(t.warnings.size(), 1u);
      EXPECT_EQ(t.warnings[0],
                "2 finite F64 values lie beyond fp32's range (the largest magnitude 1e+300) and "
                "count as Inf here: FP8 scaling works in fp32");
    } else {
      // Integers are described, and it is said why they are not quantized.
      EXPECT_EQ(t.amax, t.name == "u16" ? 65535.0 : t.name == "u32" ? 0x1p32 : 0x1p64);
      EXPECT_TRUE(t.recipes.empty());
      EXPECT_EQ(t.not_quantized, "an integer tensor (" + t.dtype +
                                     "): FP8 holds floating-point values, so its values are "
                                     "described, not quantized");
    }
  }
  // A dtype it does not read names the tensor and what it reads.
  std::vector<uint8_t> img = safetensors_image({{"t", StDtype::U8, {1}, {0}}});
  const std::string h = R"({"t":{"dtype":"F4","shape":[1],"data_offsets":[0,1]}})";
  img.resize(8 + h.size() + 1, 0);
  const uint64_t n = h.size();
  std::memcpy(img.data(), &n, 8);
  std::memcpy(img.data() + 8, h.data(), h.size());
  const std::string err = error_of([&] { Checkpoint::from_image(img, "f4"); });
  EXPECT_NE(err.find("tensor 't': unknown dtype 'F4' (the workbench reads F64, F32"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("F8_E8M0"), std::string::npos) << err;
}

// A Hugging Face folder opens as the checkpoint it holds: model.safetensors before its
// sharded index, the index before pytorch_model.bin, else the folder's only .safetensors
// file; a folder with none, or with several files and no index, says what it looked for.
TEST_F(CheckpointReading, AFolderOpensTheCheckpointItHolds) {
  namespace fs = std::filesystem;
  const auto tensor_names = [](const Checkpoint& c) {
    std::vector<std::string> n;
    for (const auto& t : c.tensors()) n.push_back(t.entry->name);
    std::sort(n.begin(), n.end());
    return n;
  };
  // Sharded: the index names both shards.
  fs::create_directories(dir_ / "sharded");
  write_safetensors(path("sharded/model-00001-of-00002.safetensors"),
                    {{"a", StDtype::F32, {2}, f32_bytes({1, 2})}});
  write_safetensors(path("sharded/model-00002-of-00002.safetensors"),
                    {{"b", StDtype::F32, {2}, f32_bytes({3, 4})}});
  std::ofstream(path("sharded/model.safetensors.index.json"))
      << R"({"weight_map": {"a": "model-00001-of-00002.safetensors",)"
      << R"( "b": "model-00002-of-00002.safetensors"}})";
  std::ofstream(path("sharded/config.json")) << "{}";
  EXPECT_EQ(tensor_names(*open_any_checkpoint(path("sharded"))),
            (std::vector<std::string>{"a", "b"}));
  // model.safetensors comes first where both are there.
  write_safetensors(path("sharded/model.safetensors"),
                    {{"m", StDtype::F32, {2}, f32_bytes({5, 6})}});
  EXPECT_EQ(tensor_names(*open_any_checkpoint(path("sharded"))), std::vector<std::string>{"m"});
  // torch.save's pytorch_model.bin.
  fs::create_directories(dir_ / "pt");
  fs::copy_file(std::string(FP8WB_PT_DIR) + "/model_state.pt", path("pt/pytorch_model.bin"));
  EXPECT_EQ(tensor_names(*open_any_checkpoint(path("pt"))),
            tensor_names(*open_any_checkpoint(std::string(FP8WB_PT_DIR) + "/model_state.pt")));
  // The only .safetensors file, whatever its name.
  fs::create_directories(dir_ / "one");
  write_safetensors(path("one/weights.safetensors"), {{"w", StDtype::F32, {2}, f32_bytes({1, 2})}});
  EXPECT_EQ(tensor_names(*open_any_checkpoint(path("one"))), std::vector<std::string>{"w"});
  // Two and no index: which one is meant is not guessed.
  write_safetensors(path("one/other.safetensors"), {{"v", StDtype::F32, {2}, f32_bytes({1, 2})}});
  const std::string two = error_of([&] { open_any_checkpoint(path("one")); });
  EXPECT_NE(two.find(path("one") + " is a folder with several .safetensors files"),
            std::string::npos)
      << two;
  // Nothing to read.
  fs::create_directories(dir_ / "empty");
  std::ofstream(path("empty/config.json")) << "{}";
  const std::string none = error_of([&] { open_any_checkpoint(path("empty")); });
  EXPECT_NE(none.find(path("empty") + " is a folder with no checkpoint in it: looked for "
                                      "model.safetensors, model.safetensors.index.json"),
            std::string::npos)
      << none;
  // Issue #52: a folder of model folders names the subfolders that hold a checkpoint.
  fs::create_directories(dir_ / "models" / "notes");
  fs::create_directories(dir_ / "models" / "b-model");
  fs::create_directories(dir_ / "models" / "a-model");
  write_safetensors(path("models/a-model/model.safetensors"),
                    {{"w", StDtype::F32, {2}, f32_bytes({1, 2})}});
  write_safetensors(path("models/b-model/model.safetensors"),
                    {{"w", StDtype::F32, {2}, f32_bytes({1, 2})}});
  const std::string models = error_of([&] { open_any_checkpoint(path("models")); });
  EXPECT_NE(
      models.find(path("models") +
                  " holds no checkpoint itself, but these 2 subfolders "
                  "do: " +
                  path("models/a-model") + ", " + path("models/b-model") + "; give one of them"),
      std::string::npos)
      << models;
}

// bf16 and converted dtypes go through the same reads.
TEST_F(CheckpointReading, TruncatedBf16AndF16TensorsGiveErrors) {
  for (StDtype d : {StDtype::BF16, StDtype::F16, StDtype::F8_E4M3}) {
    const std::string p = path("m.safetensors");
    const size_t n = 256 * 256;
    write_safetensors(p, {{"w", d, {256, 256}, std::vector<uint8_t>(n * st_dtype_size(d), 0x3C)}});
    const auto ckpt = open_any_checkpoint(p);
    ASSERT_EQ(::truncate(p.c_str(), 100), 0);
    const std::string err = error_of([&] { analyze_checkpoint(*ckpt); });
    EXPECT_NE(err.find("'w'"), std::string::npos) << st_dtype_name(d) << ": " << err;
    EXPECT_NE(err.find(p), std::string::npos) << err;
  }
}

// What the file holds decides the reader; a file that is no checkpoint says what it is
// not and what was expected.
TEST_F(CheckpointReading, FilesAreRecognisedByContent) {
  // A safetensors file named .bin.
  const std::string bin = path("weights.bin");
  write_safetensors(bin, {{"w", StDtype::F32, {2, 2}, f32_bytes({1, 2, 3, 4})}});
  EXPECT_EQ(open_any_checkpoint(bin)->to_float(*open_any_checkpoint(bin)->find("w")),
            (std::vector<float>{1, 2, 3, 4}));
  // torch.save's zip archive named .safetensors.
  const std::string pt = path("state.safetensors");
  std::filesystem::copy_file(std::string(FP8WB_PT_DIR) + "/model_state.pt", pt);
  EXPECT_GT(open_any_checkpoint(pt)->tensors().size(), 0u);
  // A PNG image.
  const std::string png = path("x.png");
  {
    std::ofstream f(png, std::ios::binary);
    // The signature and the start of the IHDR chunk (29 bytes, NULs included).
    static const char kPng[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x06\0\0\0";
    f << std::string(kPng, sizeof kPng - 1);
  }
  const std::string e = error_of([&] { open_any_checkpoint(png); });
  EXPECT_NE(
      e.find(png + " is not a safetensors file: its first 8 bytes do not give a header length "
                   "(expected a little-endian length below 100 MB followed by '{')"),
      std::string::npos)
      << e;
  EXPECT_NE(e.find("PNG image"), std::string::npos) << e;
  EXPECT_EQ(e.find("header length 7"), std::string::npos) << e;  // no odd numbers
  // Text whose first 8 bytes read as a huge length.
  const std::string txt = path("notes.safetensors");
  std::ofstream(txt) << "not a checkpoint{ at all, just some words";
  const std::string t = error_of([&] { open_any_checkpoint(txt); });
  EXPECT_NE(t.find("is not a safetensors file"), std::string::npos) << t;
  EXPECT_EQ(t.find("over the 100 MB limit"), std::string::npos) << t;
  // A safetensors file cut after its header length 640 (0x80 0x02: the start of a pickle of
  // protocol 2): said to be cut short. The same bytes named .pt are read as a pickle.
  const std::string cut = path("cut.safetensors");
  const std::string cut_pt = path("cut.pt");
  for (const std::string& p : {cut, cut_pt})
    std::ofstream(p, std::ios::binary) << std::string("\x80\x02\0\0\0\0\0\0", 8);
  const std::string c = error_of([&] { open_any_checkpoint(cut); });
  EXPECT_NE(c.find("header length 640 runs past the end of the file (8 bytes)"), std::string::npos)
      << c;
  const std::string c_pt = error_of([&] { open_any_checkpoint(cut_pt); });
  EXPECT_NE(c_pt.find("legacy format"), std::string::npos) << c_pt;
  // A real legacy pickle named .safetensors is named as one.
  const std::string pickle = path("old.safetensors");
  {
    // Split literals: a hex escape would take the next hex digit ('c') with it.
    static const char kPickle[] =
        "\x80\x02}q\x00(X\x01\x00\x00\x00"
        "wq\x01"
        "ctorch._utils\n";
    std::ofstream(pickle, std::ios::binary) << std::string(kPickle, sizeof kPickle - 1);
  }
  const std::string o = error_of([&] { open_any_checkpoint(pickle); });
  EXPECT_NE(o.find("pickle"), std::string::npos) << o;
  // A .pt that is neither a zip archive nor safetensors.
  const std::string fake = path("model.pt");
  std::ofstream(fake) << "hello, this is not a model";
  const std::string f = error_of([&] { open_any_checkpoint(fake); });
  EXPECT_NE(f.find(fake + " is not a PyTorch checkpoint"), std::string::npos) << f;
}

// NaN and Inf are counted (NaN apart from Inf) and stay out of the moments and amax.
TEST_F(CheckpointReading, NanAndInfAreCountedNotFolded) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v(64 * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 3.0f;  // -3..3
  const std::vector<size_t> nans = {5, 100, 2000}, infs = {7, 3000};
  for (size_t i : nans) v[i] = nan;
  for (size_t i : infs) v[i] = inf;
  v[4000] = -inf;
  // The reference: the finite values alone.
  double sum = 0, n = 0, amax = 0;
  for (float x : v) {
    if (!std::isfinite(x)) continue;
    sum += x;
    n += 1;
    amax = std::max(amax, static_cast<double>(std::fabs(x)));
  }
  std::vector<uint8_t> bf16(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &v[i], 4);
    const uint16_t h = static_cast<uint16_t>(b >> 16);  // exact: small integers, NaN, Inf
    std::memcpy(&bf16[2 * i], &h, 2);
  }
  const std::string p = path("nan.safetensors");
  write_safetensors(
      p, {{"f32", StDtype::F32, {64, 64}, f32_bytes(v)}, {"bf16", StDtype::BF16, {64, 64}, bf16}});
  AnalysisOptions o;
  o.device = AnalysisDevice::Cpu;
  const auto result = analyze_checkpoint(*open_any_checkpoint(p), o);
  ASSERT_EQ(result.size(), 2u);
  for (const TensorAnalysis& a : result) {
    EXPECT_EQ(a.nan_count, 3) << a.name;
    EXPECT_EQ(a.inf_count, 3) << a.name;
    EXPECT_NEAR(a.mean, sum / n, 1e-9) << a.name;
    EXPECT_EQ(a.amax, amax) << a.name;
    for (const RecipeResult& r : a.recipes) EXPECT_FALSE(std::isnan(r.sqnr_db)) << r.name;
  }
}

}  // namespace
}  // namespace fp8wb
