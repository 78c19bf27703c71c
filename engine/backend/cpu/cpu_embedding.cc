// Why: token and position embeddings, forward (a row gather) and backward
// (a scatter-add) side by side. The backward must be deterministic and
// race-free although many rows share an id, so instead of atomics it
// groups the rows by id (a counting sort, stable in row order) and gives
// each id to one thread, which adds that id's rows in row order in fp32 and
// rounds into the table's dtype once.
#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_elementwise.h"
#include "engine/backend/cpu/cpu_fp32_view.h"
#include "engine/backend/cpu/cpu_parallel.h"
#include "engine/numerics/convert.h"

namespace mixtrain {

using cpu_ops::add_into;
using cpu_ops::Fp32View;
using cpu_ops::ThreadScratch;

namespace {

// Row indices 0..N-1 grouped by id: the rows holding id v are
// rows[offsets[v] .. offsets[v+1]) in increasing order; used_ids lists the
// ids that occur, increasing. Counted as workspace.
struct RowsById {
  Tensor storage;  // int32: offsets (V+1), rows (N), used_ids (up to N)
  const int32_t* offsets;
  const int32_t* rows;
  const int32_t* used_ids;
  int64_t used_count;
};

RowsById group_rows_by_id(Backend& backend, const int32_t* ids, int64_t n, int64_t vocab) {
  RowsById g;
  g.storage = backend.empty({vocab + 1 + 2 * n}, DType::kI32, MemoryCategory::kWorkspace);
  int32_t* offsets = g.storage.data_as<int32_t>();
  int32_t* rows = offsets + vocab + 1;
  int32_t* used = rows + n;
  std::fill_n(offsets, vocab + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++offsets[ids[i] + 1];
  g.used_count = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    if (offsets[v + 1] > 0) used[g.used_count++] = static_cast<int32_t>(v);
    offsets[v + 1] += offsets[v];
  }
  // offsets[v] now starts id v's slots; it serves as the cursor of the next
  // free slot while rows go in (in increasing order), which leaves it at
  // the start of id v + 1: shift back by one id afterwards.
  for (int64_t i = 0; i < n; ++i) rows[offsets[ids[i]]++] = static_cast<int32_t>(i);
  for (int64_t v = vocab; v > 0; --v) offsets[v] = offsets[v - 1];
  offsets[0] = 0;
  g.offsets = offsets;
  g.rows = rows;
  g.used_ids = used;
  return g;
}

}  // namespace

// out (N,C) = table[ids] (+ out when accumulate); table (V,C), ids (N).
void CpuBackend::do_embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                                      bool accumulate) {
  const int64_t n_rows = ids.numel();
  const int64_t channels = table.dim(1);
  const int32_t* id = ids.data_as<int32_t>();
  if (!accumulate) {
    // A gather: convert each table row straight into its output row.
    const size_t table_row_bytes = channels * dtype_size(table.dtype());
    const size_t out_row_bytes = channels * dtype_size(out.dtype());
    const char* table_bytes = static_cast<const char*>(table.data());
    char* out_bytes = static_cast<char*>(out.data());
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_rows; ++n) {
      convert(table_bytes + id[n] * table_row_bytes, table.dtype(), out_bytes + n * out_row_bytes,
              out.dtype(), static_cast<size_t>(channels));
    }
    return;
  }
  const ThreadScratch scratch(*this, 2 * channels);
  const Fp32View table_view(table);
  const Fp32View out_view(out);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < n_rows; ++n) {
    float* buffers = scratch.mine();
    const float* row = table_view.read(id[n] * channels, channels, buffers);
    float* o = out_view.update(n * channels, channels, buffers + channels);
    add_into(o, row, channels);
    out_view.commit(n * channels, channels, o);
  }
}

// dtable[ids[n]] += dout[n] for every row n: each id's rows are added, in
// increasing n, onto the fp32 value of its table row, rounded back once.
void CpuBackend::do_embedding_backward(const Tensor& dtable, const Tensor& dout,
                                       const Tensor& ids) {
  const int64_t channels = dtable.dim(1);
  const RowsById groups =
      group_rows_by_id(*this, ids.data_as<int32_t>(), ids.numel(), dtable.dim(0));
  const ThreadScratch scratch(*this, 2 * channels);
  const Fp32View dtable_view(dtable);
  const Fp32View dout_view(dout);
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t u = 0; u < groups.used_count; ++u) {
    float* buffers = scratch.mine();
    const int64_t v = groups.used_ids[u];
    float* acc = dtable_view.update(v * channels, channels, buffers);
    for (int32_t k = groups.offsets[v]; k < groups.offsets[v + 1]; ++k) {
      add_into(acc, dout_view.read(groups.rows[k] * channels, channels, buffers + channels),
               channels);
    }
    dtable_view.commit(v * channels, channels, acc);
  }
}

}  // namespace mixtrain
