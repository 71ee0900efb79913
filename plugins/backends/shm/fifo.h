// A first-in first-out queue over one vector: the communicator's task queue.
//
// std::deque allocates a node per 512 bytes, so with 152-byte tasks and a
// queue that fills and drains around one element (a send or recv issued,
// then taken by its caller's wait), every push allocated a node and every
// pop freed it. Here the vector keeps its capacity: popping the last
// element resets the queue to the vector's start, and a queue that never
// drains is compacted once its consumed prefix is as long as the rest.
#ifndef DIST_PLUGINS_BACKENDS_SHM_FIFO_H_
#define DIST_PLUGINS_BACKENDS_SHM_FIFO_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace dist_shm {

template <typename T>
class Fifo {
 public:
  using const_iterator = typename std::vector<T>::const_iterator;
  using iterator = typename std::vector<T>::iterator;

  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  iterator begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  const_iterator end() const { return items_.end(); }

  void push_back(T item) {
    if (head_ > 0 && head_ >= items_.size() - head_) {
      // The consumed prefix is at least as long as what is queued: drop it
      // (amortized O(1) per element, and memory bounded by twice the queue).
      items_.erase(items_.begin(), begin());
      head_ = 0;
    }
    items_.push_back(std::move(item));
  }
  void pop_front() {
    items_[head_] = T();  // release what the element holds now
    if (++head_ == items_.size()) clear();
  }
  void clear() {
    items_.clear();  // keeps the capacity
    head_ = 0;
  }

 private:
  std::vector<T> items_;
  size_t head_ = 0;  // index of the front element
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_FIFO_H_
