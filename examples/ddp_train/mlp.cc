#include "examples/ddp_train/mlp.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace ddp_example {

Dataset MakeDataset(size_t samples, size_t features, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Dataset data;
  data.features = features;
  data.x.resize(samples * features);
  data.y.resize(samples);
  for (size_t s = 0; s < samples; ++s) {
    float target = 0;
    for (size_t f = 0; f < features; ++f) {
      const float v = uniform(rng);
      data.x[s * features + f] = v;
      target += std::sin(static_cast<float>(f + 1) * v) / static_cast<float>(features);
    }
    data.y[s] = target;
  }
  return data;
}

Mlp::Mlp(const std::vector<size_t>& layer_sizes, unsigned seed) {
  std::mt19937 rng(seed);
  for (size_t l = 0; l + 1 < layer_sizes.size(); ++l) {
    Layer layer;
    layer.in = layer_sizes[l];
    layer.out = layer_sizes[l + 1];
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(layer.in)));
    layer.weight.resize(layer.in * layer.out);
    for (float& w : layer.weight) w = normal(rng);
    layer.bias.assign(layer.out, 0.0f);
    layers_.push_back(std::move(layer));
  }
}

double Mlp::ForwardBackward(const Dataset& data, size_t begin, size_t end,
                            const GradientSlots& slots,
                            const std::function<void(size_t)>& on_layer_done) {
  const size_t batch = end - begin;
  const size_t depth = layers_.size();
  // activations[l]: input of layer l (batch x in); activations[depth]: output.
  std::vector<std::vector<float>> activations(depth + 1);
  activations[0].assign(data.x.begin() + begin * data.features,
                        data.x.begin() + end * data.features);
  for (size_t l = 0; l < depth; ++l) {
    const Layer& layer = layers_[l];
    std::vector<float>& out = activations[l + 1];
    out.assign(batch * layer.out, 0.0f);
    for (size_t s = 0; s < batch; ++s) {
      const float* in = &activations[l][s * layer.in];
      for (size_t o = 0; o < layer.out; ++o) {
        float sum = layer.bias[o];
        const float* w = &layer.weight[o * layer.in];
        for (size_t i = 0; i < layer.in; ++i) sum += w[i] * in[i];
        out[s * layer.out + o] = l + 1 < depth ? std::tanh(sum) : sum;
      }
    }
  }
  // Loss = mean over the batch of (prediction - y)^2 / 2.
  double loss = 0;
  std::vector<float> delta(batch);  // d loss / d output, per sample
  for (size_t s = 0; s < batch; ++s) {
    const float error = activations[depth][s] - data.y[begin + s];
    loss += 0.5 * error * error;
    delta[s] = error / static_cast<float>(batch);
  }
  for (size_t l = depth; l-- > 0;) {
    const Layer& layer = layers_[l];
    float* grad_w = slots.weight[l];
    float* grad_b = slots.bias[l];
    std::fill(grad_w, grad_w + layer.in * layer.out, 0.0f);
    std::fill(grad_b, grad_b + layer.out, 0.0f);
    std::vector<float> delta_in(l > 0 ? batch * layer.in : 0, 0.0f);
    for (size_t s = 0; s < batch; ++s) {
      const float* in = &activations[l][s * layer.in];
      for (size_t o = 0; o < layer.out; ++o) {
        const float d = delta[s * layer.out + o];
        grad_b[o] += d;
        float* gw = &grad_w[o * layer.in];
        const float* w = &layer.weight[o * layer.in];
        for (size_t i = 0; i < layer.in; ++i) {
          gw[i] += d * in[i];
          if (l > 0) delta_in[s * layer.in + i] += d * w[i];
        }
      }
    }
    if (l > 0) {
      // Through the tanh of the previous layer: d tanh = 1 - tanh^2.
      for (size_t k = 0; k < delta_in.size(); ++k) {
        const float a = activations[l][k];
        delta_in[k] *= 1.0f - a * a;
      }
      delta.swap(delta_in);
    }
    on_layer_done(l);
  }
  return loss / static_cast<double>(batch);
}

void Mlp::Step(const GradientSlots& slots, float learning_rate) {
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& layer = layers_[l];
    for (size_t k = 0; k < layer.weight.size(); ++k)
      layer.weight[k] -= learning_rate * slots.weight[l][k];
    for (size_t k = 0; k < layer.bias.size(); ++k)
      layer.bias[k] -= learning_rate * slots.bias[l][k];
  }
}

}  // namespace ddp_example
