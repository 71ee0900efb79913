// A small multi-layer perceptron (tanh hidden layers, linear output, mean
// squared error) with a hand-written backward pass, enough to train
// data-parallel with dist::GradientReducer and to check the result against
// training the same model in one process.
#ifndef DIST_EXAMPLES_DDP_TRAIN_MLP_H_
#define DIST_EXAMPLES_DDP_TRAIN_MLP_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace ddp_example {

struct Layer {
  size_t in = 0, out = 0;
  std::vector<float> weight;  // out x in, row-major
  std::vector<float> bias;    // out
};

// Synthetic regression data: x uniform in [-1, 1], y a fixed smooth
// function of x. Deterministic, identical on every rank.
struct Dataset {
  size_t features = 0;
  std::vector<float> x;  // samples x features
  std::vector<float> y;  // samples
  size_t samples() const { return y.size(); }
};

Dataset MakeDataset(size_t samples, size_t features, unsigned seed);

class Mlp {
 public:
  // layer_sizes = {inputs, hidden..., 1}; weights from a fixed seed.
  Mlp(const std::vector<size_t>& layer_sizes, unsigned seed);

  std::vector<Layer>& layers() { return layers_; }
  const std::vector<Layer>& layers() const { return layers_; }

  // Gradient storage per layer (same shapes as the parameters). Pointers may
  // point into a GradientReducer's buckets.
  struct GradientSlots {
    std::vector<float*> weight;
    std::vector<float*> bias;
  };

  // Mean loss over samples [begin, end) and its gradients into `slots`.
  // `on_layer_done(l)` runs as soon as layer l's gradients are final (last
  // layer first), which is where data-parallel training starts reducing.
  double ForwardBackward(const Dataset& data, size_t begin, size_t end, const GradientSlots& slots,
                         const std::function<void(size_t)>& on_layer_done);

  void Step(const GradientSlots& slots, float learning_rate);

 private:
  std::vector<Layer> layers_;
};

}  // namespace ddp_example

#endif  // DIST_EXAMPLES_DDP_TRAIN_MLP_H_
