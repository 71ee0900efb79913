// Data-parallel training of a small MLP with dist::GradientReducer.
//
// Every rank builds the same model and the same synthetic batch, trains on
// its shard of the batch, and the reducer averages gradients across ranks;
// with equal shards that is exactly the gradient of the whole batch. With
// --check every rank also trains the model alone on the whole batch and
// compares the weights after --steps steps.
//
//   distrun -n 4 ddp_train --steps 20 --check
//   distrun -n 4 --survive ddp_train --steps 20 --check --kill_rank 2
//     (rank 2 dies at step 5; the others shrink to 3 ranks and finish;
//     each step still covers the whole batch, so --check still holds)
//   distrun -n 4 --max-restarts 1 ddp_train --steps 20 --check --kill_rank 2
//     (rank 2 dies at step 5; distrun restarts it as a joining process; the
//     others shrink, grow back to 4 ranks admitting it, send it the weights
//     and the step, and all four finish; --check still holds)
//   ddp_train --bench ...   # step time: overlapped vs. reduce-after-backward
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dist/gradient_reducer.hpp"
#include "examples/ddp_train/mlp.h"

ABSL_FLAG(int, steps, 20, "training steps");
ABSL_FLAG(int, batch, 96, "global batch size (divided evenly among the ranks)");
ABSL_FLAG(std::string, layers, "8,32,32,1", "layer sizes: inputs, hidden..., 1");
ABSL_FLAG(double, lr, 0.1, "learning rate");
ABSL_FLAG(bool, check, false, "compare with single-process training on the whole batch");
ABSL_FLAG(double, tolerance, 1e-4, "largest allowed |w_ddp - w_single| with --check");
ABSL_FLAG(bool, bench, false,
          "time steps with bucket all-reduces overlapping the backward pass against reducing "
          "only after the whole backward pass");
ABSL_FLAG(size_t, bucket_mb, 25, "bucket size cap in MiB (the first bucket is 1 MiB)");
ABSL_FLAG(int, kill_rank, -1,
          "survival demo: this rank SIGKILLs itself at the start of --kill_step; the others "
          "shrink the group and finish the steps on the whole batch (turns survival on; run "
          "under distrun --survive; docs/survival.md)");
ABSL_FLAG(int, kill_step, 5, "the step at which --kill_rank dies");

namespace {

using ddp_example::Dataset;
using ddp_example::Mlp;

std::string WeightName(size_t l) { return absl::StrCat("layer", l, ".weight"); }
std::string BiasName(size_t l) { return absl::StrCat("layer", l, ".bias"); }

// Training state of one data-parallel replica.
struct Replica {
  Mlp model;
  dist::GradientReducer reducer;
  Mlp::GradientSlots slots;

  Replica(const std::vector<size_t>& sizes, dist::ProcessGroup& group,
          dist::GradientReducer::Options options)
      : model(sizes, /*seed=*/7), reducer(group, options) {}

  absl::Status Setup() {
    for (size_t l = 0; l < model.layers().size(); ++l) {
      const ddp_example::Layer& layer = model.layers()[l];
      DIST_RETURN_IF_ERROR(
          reducer.AddBucketedGradient(WeightName(l), layer.weight.size(), DIST_FLOAT32));
      DIST_RETURN_IF_ERROR(
          reducer.AddBucketedGradient(BiasName(l), layer.bias.size(), DIST_FLOAT32));
    }
    DIST_RETURN_IF_ERROR(reducer.Finalize());
    for (size_t l = 0; l < model.layers().size(); ++l) {
      absl::StatusOr<float*> w = reducer.BucketedData<float>(WeightName(l));
      absl::StatusOr<float*> b = reducer.BucketedData<float>(BiasName(l));
      if (!w.ok()) return w.status();
      if (!b.ok()) return b.status();
      slots.weight.push_back(*w);
      slots.bias.push_back(*b);
    }
    return absl::OkStatus();
  }

  // One step on samples [begin, end). `overlap`: mark each layer ready as
  // soon as its gradients are final; otherwise only after the whole backward.
  absl::StatusOr<double> TrainStep(const Dataset& data, size_t begin, size_t end, float lr,
                                   bool overlap) {
    absl::Status marking;
    auto mark = [&](size_t l) {
      if (!marking.ok()) return;
      marking = reducer.MarkReady(WeightName(l));
      if (marking.ok()) marking = reducer.MarkReady(BiasName(l));
    };
    const double loss = model.ForwardBackward(data, begin, end, slots, [&](size_t l) {
      if (overlap) mark(l);
    });
    if (!overlap) {
      for (size_t l = model.layers().size(); l-- > 0;) mark(l);
    }
    DIST_RETURN_IF_ERROR(marking);
    DIST_RETURN_IF_ERROR(reducer.Finish());
    model.Step(slots, lr);
    return loss;
  }
};

// The reference: one process, whole batch, no communication.
Mlp TrainAlone(const std::vector<size_t>& sizes, const Dataset& data, int steps, float lr) {
  Mlp model(sizes, /*seed=*/7);
  std::vector<std::vector<float>> w, b;
  Mlp::GradientSlots slots;
  for (const ddp_example::Layer& layer : model.layers()) {
    w.emplace_back(layer.weight.size());
    b.emplace_back(layer.bias.size());
  }
  for (size_t l = 0; l < w.size(); ++l) {
    slots.weight.push_back(w[l].data());
    slots.bias.push_back(b[l].data());
  }
  for (int s = 0; s < steps; ++s) {
    model.ForwardBackward(data, 0, data.samples(), slots, [](size_t) {});
    model.Step(slots, lr);
  }
  return model;
}

double MaxDifference(const Mlp& a, const Mlp& b) {
  double worst = 0;
  for (size_t l = 0; l < a.layers().size(); ++l) {
    for (size_t k = 0; k < a.layers()[l].weight.size(); ++k) {
      worst = std::max(
          worst, static_cast<double>(std::fabs(a.layers()[l].weight[k] - b.layers()[l].weight[k])));
    }
    for (size_t k = 0; k < a.layers()[l].bias.size(); ++k) {
      worst = std::max(
          worst, static_cast<double>(std::fabs(a.layers()[l].bias[k] - b.layers()[l].bias[k])));
    }
  }
  return worst;
}

// Whether this process was started to join a running job (distrun
// --max-restarts sets DIST_JOIN=1), and whether the job restarts lost ranks
// (DIST_MAX_RESTARTS), so that survivors grow back.
bool EnvFlag(const char* name) {
  const char* value = std::getenv(name);
  int number = 0;
  return value != nullptr && absl::SimpleAtoi(value, &number) && number > 0;
}

// Rank 0's weights and step go to every rank of a grown group: the joiners
// start from where the survivors are.
absl::Status ShareState(dist::ProcessGroup& group, Mlp& model, int& step) {
  int64_t shared_step = step;
  dist_buffer_t b = dist_make_buffer(&shared_step, 1, DIST_INT64, dist_cpu());
  DIST_RETURN_IF_ERROR(group.Broadcast(b, b, 0));
  step = static_cast<int>(shared_step);
  for (ddp_example::Layer& layer : model.layers()) {
    for (std::vector<float>* v : {&layer.weight, &layer.bias}) {
      dist_buffer_t p = dist_make_buffer(v->data(), v->size(), DIST_FLOAT32, dist_cpu());
      DIST_RETURN_IF_ERROR(group.Broadcast(p, p, 0));
    }
  }
  return absl::OkStatus();
}

int Fail(int rank, const absl::Status& status) {
  std::fprintf(stderr, "ddp_train rank %d: %s\n", rank, std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Data-parallel MLP training with dist::GradientReducer");
  absl::ParseCommandLine(argc, argv);
  std::vector<size_t> sizes;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_layers), ',')) {
    size_t size = 0;
    if (!absl::SimpleAtoi(part, &size) || size == 0) {
      std::fprintf(stderr, "ddp_train: --layers '%s' must be positive integers like 8,32,1\n",
                   absl::GetFlag(FLAGS_layers).c_str());
      return 2;
    }
    sizes.push_back(size);
  }
  if (sizes.size() < 2 || sizes.back() != 1) {
    std::fprintf(stderr, "ddp_train: --layers needs at least inputs and a final 1\n");
    return 2;
  }

  const bool joining = EnvFlag("DIST_JOIN");
  const bool grow_back = EnvFlag("DIST_MAX_RESTARTS");
  // A restarted process does not die again.
  const int kill_rank = joining ? -2 : absl::GetFlag(FLAGS_kill_rank);
  dist::ProcessGroup::Options init;
  if (kill_rank >= 0 || joining) init.options.push_back({"dist.survival", "1"});
  absl::StatusOr<dist::ProcessGroup> group = dist::ProcessGroup::Init(init);
  if (!group.ok()) return Fail(-1, group.status());
  int rank = group->rank();
  int world = group->world_size();
  const int first_world = world;
  const int batch = absl::GetFlag(FLAGS_batch);
  if (batch % world != 0) {
    std::fprintf(stderr, "ddp_train: --batch %d must divide evenly among %d ranks\n", batch, world);
    return 2;
  }
  size_t shard = static_cast<size_t>(batch / world);
  const Dataset data = ddp_example::MakeDataset(static_cast<size_t>(batch), sizes.front(), 11);
  const float lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  const int steps = absl::GetFlag(FLAGS_steps);

  dist::GradientReducer::Options options;
  options.bucket_bytes = absl::GetFlag(FLAGS_bucket_mb) << 20;
  auto replica_ptr = std::make_unique<Replica>(sizes, *group, options);
  int first_step = 0;
  if (joining) {  // admitted into a grown group: take the survivors' state
    if (absl::Status s = ShareState(*group, replica_ptr->model, first_step); !s.ok()) {
      return Fail(rank, s);
    }
    std::printf("rank %d: joined as rank %d of %d at step %d\n", rank, rank, world, first_step);
  }
  if (absl::Status s = replica_ptr->Setup(); !s.ok()) return Fail(rank, s);
  Replica& replica = *replica_ptr;

  if (absl::GetFlag(FLAGS_bench)) {
    // Alternate the two modes step by step so machine noise hits both alike.
    double seconds[2] = {0, 0};
    for (int s = 0; s < 2 * steps + 2; ++s) {
      const bool overlap = s % 2 == 0;
      if (!group->Barrier().ok()) return 1;
      const auto start = std::chrono::steady_clock::now();
      absl::StatusOr<double> loss =
          replica.TrainStep(data, rank * shard, (rank + 1) * shard, lr, overlap);
      if (!loss.ok()) return Fail(rank, loss.status());
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (s >= 2) seconds[overlap ? 0 : 1] += took;  // first pair is warm-up
    }
    if (rank == 0) {
      const double overlapped = 1e3 * seconds[0] / steps, sequential = 1e3 * seconds[1] / steps;
      std::printf("ddp_train bench: %d ranks, backend %s, layers %s, %zu buckets\n", world,
                  group->backend(), absl::GetFlag(FLAGS_layers).c_str(),
                  replica.reducer.num_buckets());
      std::printf(
          "  step time overlapped: %.2f ms   reduce after backward: %.2f ms   speedup %.2fx\n",
          overlapped, sequential, sequential / overlapped);
    }
    return 0;
  }

  double loss = 0;
  bool shrunk = false;  // --kill_rank names a rank of the first group
  for (int s = first_step; s < steps;) {
    if (!shrunk && rank == kill_rank && s == absl::GetFlag(FLAGS_kill_step)) {
      std::printf("rank %d: SIGKILL at step %d (--kill_rank)\n", rank, s);
      std::fflush(stdout);
      raise(SIGKILL);
    }
    absl::StatusOr<double> step_loss =
        replica_ptr->TrainStep(data, rank * shard, (rank + 1) * shard, lr, true);
    if (step_loss.ok()) {
      loss = *step_loss;
      ++s;
      continue;
    }
    if (kill_rank < 0) return Fail(rank, step_loss.status());
    // No survivor applied step s (its all-reduce needed the dead rank), so
    // every survivor holds the same weights: shrink, rebuild the reducer on
    // the new group, split the batch anew and run step s again.
    absl::StatusOr<dist::ProcessGroup> survivors = group->Shrink();
    if (!survivors.ok()) return Fail(rank, survivors.status());
    Mlp model = replica_ptr->model;
    replica_ptr.reset();  // its reducer holds the old group
    const int old_rank = rank;
    if (grow_back) {
      // Admit the restarted ranks and hand them the weights and the step.
      absl::StatusOr<dist::ProcessGroup> grown =
          survivors->Grow(first_world - survivors->world_size());
      if (!grown.ok()) return Fail(rank, grown.status());
      survivors = std::move(grown);
      if (absl::Status shared = ShareState(*survivors, model, s); !shared.ok()) {
        return Fail(rank, shared);
      }
    }
    *group = *std::move(survivors);
    shrunk = true;
    rank = group->rank();
    world = group->world_size();
    if (batch % world != 0) {
      std::fprintf(stderr, "ddp_train: --batch %d does not divide among the %d survivors\n", batch,
                   world);
      return 2;
    }
    shard = static_cast<size_t>(batch / world);
    replica_ptr = std::make_unique<Replica>(sizes, *group, options);
    replica_ptr->model = model;
    if (absl::Status setup = replica_ptr->Setup(); !setup.ok()) return Fail(rank, setup);
    std::printf("rank %d: step %d failed (%s); went on as rank %d of %d\n", old_rank, s,
                std::string(step_loss.status().message()).c_str(), rank, world);
  }
  std::printf("rank %d of %d (%s): %d steps, shard loss %.6f, %zu buckets\n", rank, world,
              group->backend(), steps, loss, replica_ptr->reducer.num_buckets());
  if (absl::GetFlag(FLAGS_check)) {
    const Mlp alone = TrainAlone(sizes, data, steps, lr);
    const double difference = MaxDifference(replica_ptr->model, alone);
    const bool ok = difference <= absl::GetFlag(FLAGS_tolerance);
    std::printf("rank %d: max |w_ddp - w_single| = %.3g (tolerance %.3g) %s\n", rank, difference,
                absl::GetFlag(FLAGS_tolerance), ok ? "MATCH" : "MISMATCH");
    if (!ok) return 3;
  }
  return group->Barrier().ok() ? 0 : 1;
}
