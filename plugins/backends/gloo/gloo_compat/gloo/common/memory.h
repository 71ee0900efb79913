// Debian's libgloo-dev (0.0~git20220518) ships gloo/transport/tcp/pair.h,
// which includes gloo/common/memory.h, but not that header. This stand-in
// declares the three pointer wrappers pair.h and tcp/unbound_buffer.h name,
// with the same members (a shared_ptr or weak_ptr each), so that the plugin
// can name tcp::Pair (see pair_access.h). The plugin never creates or
// destroys these wrappers itself; libgloo does, with its own definitions.
#pragma once

#include <memory>
#include <thread>

namespace gloo {

template <typename T>
class WeakNonOwningPtr;
template <typename T>
class ShareableNonOwningPtr;

template <typename T>
class NonOwningPtr final {
 public:
  NonOwningPtr() {}
  explicit NonOwningPtr(const WeakNonOwningPtr<T>& weak) : ptr_(weak.ptr_.lock()) {}
  T* operator->() const noexcept { return ptr_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ptr_); }

 private:
  std::shared_ptr<T> ptr_;
};

template <typename T>
class WeakNonOwningPtr final {
 public:
  WeakNonOwningPtr() {}
  explicit WeakNonOwningPtr(const ShareableNonOwningPtr<T>& root) : ptr_(root.ptr_) {}
  explicit operator bool() const noexcept {
    return ptr_.owner_before(std::weak_ptr<T>{}) || std::weak_ptr<T>{}.owner_before(ptr_);
  }

 protected:
  std::weak_ptr<T> ptr_;
  friend class NonOwningPtr<T>;
};

template <typename T>
class ShareableNonOwningPtr final {
 public:
  explicit ShareableNonOwningPtr(T* object) : ptr_(object, [](T*) {}) {}
  ShareableNonOwningPtr(const ShareableNonOwningPtr&) = delete;
  ShareableNonOwningPtr& operator=(const ShareableNonOwningPtr&) = delete;
  ~ShareableNonOwningPtr() {
    std::weak_ptr<T> weak(ptr_);
    ptr_.reset();
    while (!weak.expired()) std::this_thread::yield();
  }

 protected:
  std::shared_ptr<T> ptr_;
  friend class WeakNonOwningPtr<T>;
};

}  // namespace gloo
