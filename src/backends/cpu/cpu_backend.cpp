// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/channel_affine.hpp"
#include "backends/cpu/concat.hpp"
#include "backends/cpu/conv2d.hpp"
#include "backends/cpu/elementwise.hpp"
#include "backends/cpu/gemm.hpp"
#include "backends/cpu/layer_norm.hpp"
#include "backends/cpu/linear.hpp"
#include "backends/cpu/pool2d.hpp"
#include "backends/cpu/softmax.hpp"
#include "common/checked_math.hpp"
#include "planner/plan_cost.hpp"

namespace fusednn {
namespace {

cpu::Conv2dGeometry conv_geometry(const WindowGeometry& w) {
  return cpu::Conv2dGeometry{w.in_channels, w.in_height,   w.in_width,   w.out_channels,
                             w.out_height,  w.out_width,   w.kernel[0],  w.kernel[1],
                             w.stride[0],   w.stride[1],   w.padding[0], w.padding[1],
                             w.dilation[0], w.dilation[1], w.groups};
}

cpu::Pool2dGeometry pool_geometry(const WindowGeometry& w) {
  return cpu::Pool2dGeometry{w.in_channels, w.in_height,  w.in_width,   w.out_height,
                             w.out_width,   w.kernel[0],  w.kernel[1],  w.stride[0],
                             w.stride[1],   w.padding[0], w.padding[1], w.count_include_pad};
}

class CpuBackend;

class CpuContext final : public ExecutionContext {
 public:
  explicit CpuContext(const CpuBackend& backend);
  void run_host(int64_t batch, const float* input, float* output) override;

 private:
  // Runs samples [first, first + count) with thread `slot`'s scratch and concat pointer table.
  void run_slice(int64_t first, int64_t count, const float* input, float* output, int slot);

  const CpuBackend& backend_;
  std::vector<float> workspace_;
  std::vector<float> scratch_;  // conv scratch, one region per thread
  // Concat input pointers, one table per thread, sized at creation: runs allocate nothing.
  std::vector<std::vector<const float*>> concat_parts_;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const Plan> plan, int64_t max_batch, int cpu_threads)
      : plan_(std::move(plan)), max_batch_(max_batch) {
    threads_ = cpu_threads > 0 ? cpu_threads
                               : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (const Step& step : plan_->steps) {
      if (step.kind == StepKind::Conv2d) {
        const auto floats =
            static_cast<int64_t>(cpu::conv2d_scratch_floats(conv_geometry(step.window)));
        scratch_floats_ = std::max(scratch_floats_, floats);
      }
    }
    flops_per_sample_ = plan_cost(*plan_).flops_per_sample;
    // The scratch sizes, checked: max_batch and the plan's sizes come from the caller and a file.
    const char* what = "the CPU context's scratch memory for options.max_batch";
    workspace_floats_ = checked_multiply(plan_->workspace_floats_per_sample, max_batch_,
                                         FDNN_STATUS_OUT_OF_MEMORY, what);
    conv_scratch_floats_ =
        checked_multiply(scratch_floats_, int64_t{threads_}, FDNN_STATUS_OUT_OF_MEMORY, what);
    context_bytes_ = checked_bytes(
        checked_add(workspace_floats_, conv_scratch_floats_, FDNN_STATUS_OUT_OF_MEMORY, what),
        sizeof(float), FDNN_STATUS_OUT_OF_MEMORY, what);
  }

  fdnn_device device() const override { return FDNN_DEVICE_CPU; }
  size_t weight_bytes() const override { return plan_->constant_bytes(); }
  size_t context_bytes() const override { return context_bytes_; }
  std::unique_ptr<ExecutionContext> create_context() const override {
    return std::make_unique<CpuContext>(*this);
  }

  BackendExplanation explain(int64_t batch) const override;

  // Threads worth using for a batch: each extra thread must have about a millisecond's
  // worth of arithmetic to hide the cost of starting it.
  static constexpr double kFlopsPerThread = 4e6;
  int threads_for(int64_t batch) const {
    const double useful = flops_per_sample_ * double(batch) / kFlopsPerThread;
    const int64_t wanted = std::clamp<int64_t>(static_cast<int64_t>(useful), 1, threads_);
    return static_cast<int>(std::min(wanted, batch));
  }

  const Plan& plan() const { return *plan_; }
  int64_t max_batch() const { return max_batch_; }
  // Samples per thread slice at this batch (run_host's split): the first slices take
  // slice_samples, the last one what remains.
  static int64_t slice_samples(int64_t batch, int threads) {
    return (batch + threads - 1) / threads;
  }
  int threads() const { return threads_; }
  int64_t scratch_floats() const { return scratch_floats_; }
  int64_t workspace_floats() const { return workspace_floats_; }
  int64_t conv_scratch_floats() const { return conv_scratch_floats_; }

 private:
  std::shared_ptr<const Plan> plan_;
  int64_t max_batch_;
  int threads_ = 1;
  int64_t scratch_floats_ = 0;       // per thread
  int64_t workspace_floats_ = 0;     // max_batch samples
  int64_t conv_scratch_floats_ = 0;  // every thread's
  size_t context_bytes_ = 0;
  double flops_per_sample_ = 0;
};

CpuContext::CpuContext(const CpuBackend& backend)
    : backend_(backend),
      workspace_(static_cast<size_t>(backend.workspace_floats())),
      scratch_(static_cast<size_t>(backend.conv_scratch_floats())),
      concat_parts_(static_cast<size_t>(backend.threads())) {
  size_t most_parts = 0;
  for (const Step& step : backend.plan().steps) {
    if (step.kind == StepKind::Concat) most_parts = std::max(most_parts, step.inputs.size());
  }
  for (auto& parts : concat_parts_) parts.resize(most_parts);
}

void CpuContext::run_host(int64_t batch, const float* input, float* output) {
  const int threads = backend_.threads_for(batch);
  if (threads == 1) {
    run_slice(0, batch, input, output, 0);
    return;
  }
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  const int64_t per_thread = CpuBackend::slice_samples(batch, threads);
  for (int t = 1; t < threads; ++t) {
    const int64_t first = t * per_thread;
    const int64_t count = std::min(per_thread, batch - first);
    if (count <= 0) break;
    workers.emplace_back([=] { run_slice(first, count, input, output, t); });
  }
  run_slice(0, std::min(per_thread, batch), input, output, 0);
  for (std::thread& worker : workers) worker.join();
}

void CpuContext::run_slice(int64_t first, int64_t count, const float* input, float* output,
                           int slot) {
  const Plan& plan = backend_.plan();
  float* scratch = scratch_.data() + slot * backend_.scratch_floats();
  const int64_t max_batch = backend_.max_batch();
  auto data = [&](int value_id) -> float* {
    const Value& value = plan.values[value_id];
    switch (value.storage) {
      case Storage::ModelInput:
        // Only read, never written: the const is restored by every kernel signature.
        return const_cast<float*>(input) + first * value.elements;
      case Storage::ModelOutput: return output + first * value.elements;
      case Storage::Workspace: break;
    }
    return workspace_.data() + value.workspace_offset * max_batch + first * value.slot_floats;
  };
  auto constant = [&](int index) -> const float* {
    return index < 0 ? nullptr : plan.constants[index].data();
  };

  for (const Step& step : plan.steps) {
    float* y = data(step.output);
    const float* x = data(step.inputs.front());
    const int64_t elements = count * plan.values[step.output].elements;
    switch (step.kind) {
      case StepKind::Linear:
        cpu::linear_forward(x, constant(step.weight), constant(step.bias), y,
                            count * step.rows_per_sample, step.in_features, step.out_features,
                            step.epilogue);
        break;
      case StepKind::Conv2d:
        cpu::conv2d_forward(x, constant(step.weight), constant(step.bias), y, count,
                            conv_geometry(step.window), step.epilogue, scratch);
        break;
      case StepKind::MaxPool2d:
        cpu::max_pool2d_forward(x, y, count, pool_geometry(step.window));
        break;
      case StepKind::AvgPool2d:
        cpu::avg_pool2d_forward(x, y, count, pool_geometry(step.window));
        break;
      case StepKind::Elementwise: cpu::elementwise_forward(x, y, elements, step.epilogue); break;
      case StepKind::ChannelAffine:
        cpu::channel_affine_forward(x, constant(step.weight), constant(step.bias), y, count,
                                    step.in_features, step.out_features, step.epilogue);
        break;
      case StepKind::LayerNorm:
        cpu::layer_norm_forward(x, constant(step.weight), constant(step.bias), y,
                                count * step.rows_per_sample, step.in_features, step.eps,
                                step.epilogue);
        break;
      case StepKind::Softmax:
        cpu::softmax_forward(x, y, count * step.rows_per_sample, step.in_features);
        break;
      case StepKind::Add: {
        // n-ary Add as a chain of in-place binary adds; the epilogue goes on the last one.
        const size_t n = step.inputs.size();
        for (size_t k = 1; k < n; ++k) {
          const Epilogue none;
          cpu::add_forward(k == 1 ? x : y, data(step.inputs[k]), y, elements,
                           k + 1 == n ? step.epilogue : none);
        }
        break;
      }
      case StepKind::Concat: {
        std::vector<const float*>& parts = concat_parts_[slot];
        for (size_t k = 0; k < step.inputs.size(); ++k) parts[k] = data(step.inputs[k]);
        cpu::concat_forward(parts.data(), step.concat_inner.data(),
                            static_cast<int>(step.inputs.size()), y, count * step.rows_per_sample);
        break;
      }
      case StepKind::Copy: std::memcpy(y, x, sizeof(float) * static_cast<size_t>(elements)); break;
    }
  }
}

std::string isa_text() { return std::string(" (") + cpu::gemm_isa_name(cpu::gemm_isa()) + ")"; }

// The Linear form for slices of `samples` samples, and why.
void explain_linear(const Step& step, int64_t samples, KernelChoice* choice) {
  const int64_t rows = samples * step.rows_per_sample;
  if (cpu::linear_form(rows) == cpu::LinearForm::PackedGemm) {
    choice->form = "packed GEMM" + isa_text();
    choice->reason = std::to_string(rows) + " rows per slice (at least " +
                     std::to_string(cpu::kLinearDotProductRowLimit) +
                     "): W packed into 16-column panels once per call pays off";
  } else {
    choice->form = "dot products" + isa_text();
    choice->reason = std::to_string(rows) + " rows per slice (fewer than " +
                     std::to_string(cpu::kLinearDotProductRowLimit) +
                     "): packing W would cost more than the multiply";
  }
}

BackendExplanation CpuBackend::explain(int64_t batch) const {
  BackendExplanation result;
  const int threads = threads_for(batch);
  const int64_t per_slice = slice_samples(batch, threads);
  const int64_t slices = (batch + per_slice - 1) / per_slice;
  const int64_t last_slice = batch - (slices - 1) * per_slice;
  result.summary = "cpu: " + std::to_string(slices) + " thread(s) of " + std::to_string(threads_) +
                   " at this batch, each running every step on its slice of " +
                   std::to_string(per_slice) + " sample(s)";
  if (last_slice != per_slice) {
    result.summary += " (the last slice " + std::to_string(last_slice) + ")";
  }
  result.summary += "; one thread per " + std::to_string(static_cast<int64_t>(kFlopsPerThread)) +
                    " FLOPs of the backend's estimate (" +
                    std::to_string(static_cast<int64_t>(flops_per_sample_)) +
                    " a sample); kernels in fp32, instruction set " +
                    cpu::gemm_isa_name(cpu::gemm_isa());
  const Plan& p = *plan_;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const Step& step = p.steps[s];
    KernelChoice choice;
    choice.first_step = choice.last_step = static_cast<int>(s);
    switch (step.kind) {
      case StepKind::Linear: {
        explain_linear(step, per_slice, &choice);
        if (last_slice != per_slice) {
          KernelChoice last;
          explain_linear(step, last_slice, &last);
          if (last.form != choice.form) {
            choice.reason += "; the last slice: " + last.form + ", " + last.reason;
          }
        }
        break;
      }
      case StepKind::Conv2d: {
        std::string why;
        const bool shifted =
            cpu::conv2d_form(conv_geometry(step.window), &why) == cpu::Conv2dForm::ShiftedWindows;
        choice.form = (shifted ? "GEMM on shifted windows" : "GEMM on im2col columns") + isa_text();
        const size_t scratch = cpu::conv2d_scratch_floats(conv_geometry(step.window));
        choice.reason =
            why + "; scratch " + std::to_string(scratch * sizeof(float)) + " bytes per thread";
        break;
      }
      case StepKind::MaxPool2d:
      case StepKind::AvgPool2d:
        choice.form =
            step.kind == StepKind::MaxPool2d ? "max pooling loop" : "average pooling loop";
        choice.reason = "the CPU's only pooling kernel";
        break;
      case StepKind::Add:
        choice.form = "elementwise add";
        choice.launches = static_cast<int>(std::max<size_t>(step.inputs.size(), 2) - 1);
        choice.reason = "the CPU's only Add kernel: " + std::to_string(choice.launches) +
                        " in-place binary pass(es)";
        break;
      default:
        choice.form = std::string(step_kind_name(step.kind)) + " loop";
        choice.reason = "the CPU's only kernel for this step";
        break;
    }
    result.kernels.push_back(std::move(choice));
  }
  return result;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Plan> plan, int64_t max_batch,
                                          int cpu_threads) {
  return std::make_unique<CpuBackend>(std::move(plan), max_batch, cpu_threads);
}

}  // namespace fusednn
