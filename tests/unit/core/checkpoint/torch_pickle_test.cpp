// PyTorch files: the ones PyTorch itself wrote (tests/data/pt, by tests/gpu/make_pt_files.py
// with torch.save) open with every tensor, dtype, shape and value its expected.json lists;
// the restricted unpickler turns malformed or hostile pickles into errors naming the byte.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fifo.h"
#include "fp8wb/core/checkpoint/open_checkpoint.h"
#include "fp8wb/core/checkpoint/torch_pickle.h"

namespace fp8wb {
namespace {

TEST(PtFilesFromPyTorch, EveryTensorDtypeShapeAndValueAsPyTorchWroteThem) {
  std::ifstream in(std::string(FP8WB_PT_DIR) + "/expected.json");
  ASSERT_TRUE(in) << FP8WB_PT_DIR;
  const auto expected = nlohmann::json::parse(in);
  int files = 0, tensors = 0;
  for (const auto& [file, want] : expected["files"].items()) {
    SCOPED_TRACE(file);
    const std::string path = std::string(FP8WB_PT_DIR) + "/" + file;
    if (want.contains("error")) {
      try {
        open_any_checkpoint(path);
        ADD_FAILURE() << "no error";
      } catch (const CheckpointError& e) {
        EXPECT_NE(std::string(e.what()).find(want["error"].get<std::string>()), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      }
      continue;
    }
    ++files;
    const auto c = open_any_checkpoint(path);
    EXPECT_EQ(c->tensors().size(), want["tensors"].size());
    for (const auto& [name, t] : want["tensors"].items()) {
      SCOPED_TRACE(name);
      const Checkpoint::Ref* r = c->find(name);
      ASSERT_NE(r, nullptr);
      ++tensors;
      EXPECT_EQ(st_dtype_name(r->entry->dtype), t["dtype"].get<std::string>());
      EXPECT_EQ(r->entry->shape, t["shape"].get<std::vector<int64_t>>());
      const std::vector<float> got = c->to_float(*r);
      const auto values = t["values"].get<std::vector<double>>();
      ASSERT_EQ(got.size(), values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        // fp64 values exactly; every narrower dtype is exact in fp32.
        const double want_v =
            r->entry->dtype == StDtype::F64 ? static_cast<float>(values[i]) : values[i];
        EXPECT_EQ(static_cast<double>(got[i]), want_v) << "element " << i;
      }
    }
  }
  EXPECT_EQ(files, 4);
  EXPECT_GE(tensors, 40);
}

// A pickle written opcode by opcode.
struct Pickle {
  std::vector<uint8_t> b;
  Pickle() { op(0x80).op(2); }
  Pickle& op(uint8_t o) {
    b.push_back(o);
    return *this;
  }
  Pickle& str(const std::string& s) {
    op('X');
    const auto n = static_cast<uint32_t>(s.size());
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(n >> (8 * i)));
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Pickle& global(const std::string& module, const std::string& name) {
    op('c');
    for (char ch : module + "\n" + name + "\n") b.push_back(static_cast<uint8_t>(ch));
    return *this;
  }
  Pickle& int1(uint8_t v) { return op('K').op(v); }
  // _rebuild_tensor_v2(storage(type, key, numel), offset, size, stride, False, OrderedDict())
  Pickle& tensor(const std::string& type, const std::string& key, uint8_t numel, uint8_t offset,
                 std::vector<uint8_t> size, std::vector<uint8_t> stride) {
    global("torch._utils", "_rebuild_tensor_v2").op('(');
    op('(').str("storage").global("torch", type).str(key).str("cpu").int1(numel).op('t').op('Q');
    int1(offset);
    op('(');
    for (uint8_t s : size) int1(s);
    op('t').op('(');
    for (uint8_t s : stride) int1(s);
    op('t').op(0x89).global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
    return *this;
  }
  Pickle& stop() { return op('.'); }
};

std::vector<uint8_t> floats(int n) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * 4);
  for (int i = 0; i < n; ++i) {
    const float f = static_cast<float>(i);
    std::memcpy(out.data() + 4 * i, &f, 4);
  }
  return out;
}

std::vector<TensorToWrite> read(const Pickle& p) {
  return read_torch_pickle(
      p.b.data(), p.b.size(),
      [](const std::string& key) {
        if (key == "0") return floats(12);
        throw CheckpointError("no record data/" + key);
      },
      "t.pt");
}

std::string error_of(const Pickle& p) {
  try {
    read(p);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "no error";
}

float at(const TensorToWrite& t, size_t i) {
  float f;
  std::memcpy(&f, t.bytes.data() + 4 * i, 4);
  return f;
}

TEST(TorchPickle, ViewsAreGatheredAndModulesNamedByTheirPath) {
  // {'v': storage[1 + 4*r + 2*c] for r < 2, c < 2}: a strided view of a 3x4 tensor.
  Pickle p;
  p.op('}').op('(').str("v").tensor("FloatStorage", "0", 12, 1, {2, 2}, {4, 2});
  // A pickled nn.Module (never run): its _parameters add no name.
  p.str("fc").global("torch.nn.modules.linear", "Linear").op(')').op(0x81);
  p.op('}')
      .str("_parameters")
      .op('}')
      .str("weight")
      .tensor("FloatStorage", "0", 12, 0, {3}, {1})
      .op('s');
  p.op('s').str("training").op(0x88).op('s').op('b');
  p.op('u').stop();
  const auto t = read(p);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "v");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(at(t[0], 0), 1.0f);
  EXPECT_EQ(at(t[0], 1), 3.0f);
  EXPECT_EQ(at(t[0], 2), 5.0f);
  EXPECT_EQ(at(t[0], 3), 7.0f);
  EXPECT_EQ(t[1].name, "fc.weight");
  EXPECT_EQ(at(t[1], 2), 2.0f);
}

TEST(TorchPickle, MalformedPicklesNameTheProblemAndTheByte) {
  Pickle ok;
  ok.op('}').str("w").tensor("FloatStorage", "0", 12, 0, {12}, {1}).op('s').stop();
  EXPECT_EQ(read(ok).size(), 1u);

  Pickle truncated = ok;
  truncated.b.pop_back();
  EXPECT_NE(error_of(truncated).find("truncated"), std::string::npos) << error_of(truncated);
  Pickle cut = ok;
  cut.b.resize(40);
  EXPECT_NE(error_of(cut).find("t.pt: data.pkl byte"), std::string::npos) << error_of(cut);

  Pickle bad_op;
  bad_op.op(0xff).stop();
  EXPECT_NE(error_of(bad_op).find("opcode 0xff"), std::string::npos) << error_of(bad_op);

  Pickle beyond;  // 4 elements from offset 10 of a 12-element storage
  beyond.op('}').str("w").tensor("FloatStorage", "0", 12, 10, {4}, {1}).op('s').stop();
  EXPECT_NE(error_of(beyond).find("beyond"), std::string::npos) << error_of(beyond);

  Pickle short_storage;  // the file claims 50 floats, the record holds 12
  short_storage.op('}').str("w").tensor("FloatStorage", "0", 50, 0, {4}, {1}).op('s').stop();
  EXPECT_NE(error_of(short_storage).find("storage '0' holds 48 bytes"), std::string::npos)
      << error_of(short_storage);

  Pickle missing;
  missing.op('}').str("w").tensor("FloatStorage", "7", 12, 0, {4}, {1}).op('s').stop();
  EXPECT_NE(error_of(missing).find("data/7"), std::string::npos) << error_of(missing);

  Pickle complex;
  complex.op('}').str("z").tensor("ComplexFloatStorage", "0", 6, 0, {6}, {1}).op('s').stop();
  EXPECT_NE(error_of(complex).find("tensor 'z' has dtype torch.ComplexFloatStorage"),
            std::string::npos)
      << error_of(complex);

  Pickle expand;  // 255 x 255 x 255 x 255 elements of stride 0: refused, not allocated
  expand.op('}')
      .str("w")
      .tensor("FloatStorage", "0", 12, 0, {255, 255, 255, 255}, {0, 0, 0, 0})
      .op('s')
      .stop();
  EXPECT_NE(error_of(expand).find("expands"), std::string::npos) << error_of(expand);

  Pickle underflow;
  underflow.op('s').stop();
  EXPECT_NE(error_of(underflow).find("stack underflow"), std::string::npos) << error_of(underflow);

  Pickle two_values;
  two_values.op(')').op(')').stop();
  EXPECT_NE(error_of(two_values).find("2 values"), std::string::npos) << error_of(two_values);
}

TEST(TorchPickle, SelfNestingAndDeepNestingAreErrorsNotCrashes) {
  Pickle cycle;  // a list that holds itself
  cycle.op(']').op('q').op(0).op('h').op(0).op('a').stop();
  EXPECT_NE(error_of(cycle).find("nested deeper than 64"), std::string::npos) << error_of(cycle);

  Pickle deep;  // 100000 nested lists
  for (int i = 0; i < 100000; ++i) deep.op(']');
  for (int i = 0; i < 99999; ++i) deep.op('a');
  deep.stop();
  EXPECT_NE(error_of(deep).find("nested deeper"), std::string::npos) << error_of(deep);

  Pickle wide;  // one list, twice in each of 40 levels: 2^40 paths
  wide.op(']');
  for (int i = 0; i < 40; ++i)
    wide.op('q').op(0).op('0').op(']').op('h').op(0).op('a').op('h').op(0).op('a');
  wide.stop();
  EXPECT_NE(error_of(wide).find("more than 4M objects"), std::string::npos) << error_of(wide);
}

TEST(TorchPickle, ViewsLargerThanTheirStorageAreRefused) {
  Pickle fits;  // broadcasting within the storage's size is a view like any other
  fits.op('}').str("w").tensor("FloatStorage", "0", 12, 0, {3, 4}, {0, 1}).op('s').stop();
  ASSERT_EQ(read(fits).size(), 1u);
  EXPECT_EQ(at(read(fits)[0], 8), 0.0f);
  EXPECT_EQ(at(read(fits)[0], 9), 1.0f);

  Pickle expand;  // 13 elements of one float: a view that expands its storage
  expand.op('}').str("w").tensor("FloatStorage", "0", 12, 0, {13}, {0}).op('s').stop();
  EXPECT_NE(error_of(expand).find("a tensor view of 13 elements expands storage '0' of 12"),
            std::string::npos)
      << error_of(expand);
}

TEST(TorchPickle, ObjectsAreCounted) {
  Pickle many;  // a list of 2.2M None: 2 MB of pickle, hundreds of MB of objects
  many.op(']').op('(');
  many.b.insert(many.b.end(), 2200000, 'N');
  many.op('e').stop();
  EXPECT_NE(error_of(many).find("more than 2097152 objects"), std::string::npos) << error_of(many);
}

// Small files that inflate (zip bombs) or expand (views): refused before the memory is
// taken, with the limit named (tests/data/pt_hostile/make_hostile_pt.py writes them).
TEST(PtFilesHostile, SmallFilesDoNotTakeLargeMemory) {
  const std::string dir = std::string(FP8WB_PT_DIR) + "/../pt_hostile/";
  const std::pair<const char*, const char*> cases[] = {
      {"pickle_bomb.pt", "record 'data.pkl' inflates 10"},
      {"zero_storage.pt", "record 'data/0' inflates"},
      {"stride0_views.pt", "a tensor view of 67100672 elements expands storage '0' of 1"},
  };
  for (const auto& [file, want] : cases) {
    try {
      open_any_checkpoint(dir + file);
      ADD_FAILURE() << file << ": accepted";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  }
}

// Files over 4 GB find their central directory through the zip64 records only: the
// same archive with the classic end record's fields set to 0xFFFF... reads the same.
TEST(PtFilesHostile, TheZip64DirectoryIsRead) {
  std::ifstream in(std::string(FP8WB_PT_DIR) + "/model_state.pt", std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(b.size(), 22u);
  const size_t end = b.size() - 22;
  ASSERT_EQ(std::memcmp(&b[end], "PK\x05\x06", 4), 0);
  std::memset(&b[end + 8], 0xFF, 12);  // entries, directory size and offset
  const std::string path = std::filesystem::temp_directory_path().string() + "/fp8wb-zip64-" +
                           std::to_string(getpid()) + ".pt";
  std::ofstream(path, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
  const auto c = open_any_checkpoint(path);
  EXPECT_EQ(c->tensors().size(),
            open_any_checkpoint(std::string(FP8WB_PT_DIR) + "/model_state.pt")->tensors().size());
  std::remove(path.c_str());
}

TEST(PtFilesHostile, AFifoIsRefusedNotWaitedOn) {
  test::FifoGuard fifo(std::filesystem::temp_directory_path().string() + "/fp8wb-fifo-" +
                       std::to_string(getpid()) + ".pt");
  ASSERT_TRUE(fifo.made());
  try {
    open_any_checkpoint(fifo.path());
    ADD_FAILURE() << "accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(fifo.path() + " is a FIFO"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fifo.reader_blocked()) << "the reader blocked in open()";
}

}  // namespace
}  // namespace fp8wb
