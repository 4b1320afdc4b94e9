// export_fp8_checkpoint(): a checkpoint's 2-D floating-point weights quantized to E4M3FN in
// 128x128 blocks with fp32 `<name>_scale_inv` companions (DeepSeek-V3's layout), the rest
// kept as stored.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fp8wb/core/checkpoint/checkpoint_analysis.h"
#include "fp8wb/kernels/quantize_cpu.h"

namespace fp8wb {

ExportReport export_fp8_checkpoint(const Checkpoint& ckpt, const std::string& path) {
  ExportReport report;
  std::vector<TensorToWrite> out;
  QuantRecipe r;
  r.kind = ScalingKind::Block128x128;
  r.format = Format::E4M3FN;
  r.partial_blocks = true;
  for (const auto& ref : ckpt.tensors()) {
    const TensorEntry& e = *ref.entry;
    const bool floating = e.dtype == StDtype::F32 || e.dtype == StDtype::F64 ||
                          e.dtype == StDtype::F16 || e.dtype == StDtype::BF16;
    const bool weight = e.name.size() >= 6 && e.name.compare(e.name.size() - 6, 6, "weight") == 0;
    if (floating && weight && e.shape.size() == 2 && e.shape[0] >= 16 && e.shape[1] >= 16) {
      const std::vector<float> v = ckpt.to_float(ref);
      const int64_t rows = e.shape[0], cols = e.shape[1];
      const auto infs = std::count_if(v.begin(), v.end(), [](float x) { return std::isinf(x); });
      if (infs > 0) {
        report.with_inf.push_back(e.name);
        report.inf_values += infs;
      }
      TensorToWrite codes{e.name, StDtype::F8_E4M3, e.shape,
                          std::vector<uint8_t>(static_cast<size_t>(rows * cols))};
      QuantizeTargets t;
      t.codes = codes.bytes.data();
      StatsOptions so;  // the counters (values turned into 0), not the histogram or map
      so.histogram = so.error_map = false;
      const CurrentQuantization q = quantize_current(TensorRef::of(v.data(), rows, cols), r, t, so);
      if (const double pct = q.result.stats.underflow_pct(); pct >= kNamedZeroedPct)
        report.zeroed.emplace_back(e.name, pct);
      const GroupLayout& L = q.scales.layout;
      TensorToWrite scales{e.name + "_scale_inv",
                           StDtype::F32,
                           {L.group_rows, L.group_cols},
                           std::vector<uint8_t>(q.scales.scale_inv.size() * 4)};
      std::memcpy(scales.bytes.data(), q.scales.scale_inv.data(), scales.bytes.size());
      out.push_back(std::move(codes));
      out.push_back(std::move(scales));
      report.quantized.push_back(e.name);
    } else {
      out.push_back({e.name, e.dtype, e.shape, ref.file->bytes(e)});
      report.kept.push_back(e.name);
    }
  }
  // The source's metadata (every file's, for a sharded set), then the layout's.
  std::map<std::string, std::string> metadata;
  for (const auto& ref : ckpt.tensors()) {
    if (ref.file) metadata.insert(ref.file->metadata().begin(), ref.file->metadata().end());
  }
  metadata.emplace("format", "pt");
  metadata["quantization"] = "fp8 E4M3FN, 128x128 blocks, <name>_scale_inv = fp32 per block";
  metadata["weight_block_size"] = "128,128";
  metadata["written_by"] = "fp8wb";
  write_safetensors(path, out, metadata);
  return report;
}

}  // namespace fp8wb
