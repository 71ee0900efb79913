// A deliberately wrong backend, to prove the conformance kit catches what it
// claims to catch. It is the tutorial's kvstore backend (the template itself,
// built on the C++ adapter, whose honest build passes the kit) with its entry
// symbol renamed and one fault, chosen by DIST_TEST_LIAR, wrapped around its
// table:
//   caps: declares float16 (which it rejects) and drops int8 (which it
//         accepts): "declared == works" and "undeclared fails" must both fail.
//   data: all_reduce results are off by one in element 0.
#define dist_backend_plugin_v1 kvstore_plugin_v1
#include "examples/plugin_template/kvstore_backend.cc"
#undef dist_backend_plugin_v1

#include <cstdlib>
#include <map>
#include <mutex>

namespace {

std::string Mode() {
  const char* mode = std::getenv("DIST_TEST_LIAR");
  return mode == nullptr ? "" : mode;
}

void LyingCapabilities(dist_backend_capabilities_t* caps) {
  kvstore_plugin_v1()->get_capabilities(caps);
  caps->dtypes = (caps->dtypes | 1u << DIST_FLOAT16) & ~(1u << DIST_INT8);
}

// all_reduce's recv buffer per work handle, to corrupt once it completes.
std::mutex g_mu;
std::map<dist_backend_work_t*, dist_buffer_t> g_recv;

dist_error_t* CorruptingAllReduce(dist_backend_comm_t* comm, const dist_op_args_t* args,
                                  dist_backend_work_t** work) {
  dist_error_t* error = kvstore_plugin_v1()->all_reduce(comm, args, work);
  if (error == nullptr && args->recv.count > 0) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_recv[*work] = args->recv;
  }
  return error;
}

void OffByOne(const dist_buffer_t& b) {
  switch (b.dtype) {
    case DIST_INT8:
    case DIST_UINT8:
      ++*static_cast<uint8_t*>(b.data);
      break;
    case DIST_INT32:
      ++*static_cast<int32_t*>(b.data);
      break;
    case DIST_INT64:
      ++*static_cast<int64_t*>(b.data);
      break;
    case DIST_FLOAT32:
      *static_cast<float*>(b.data) += 1;
      break;
    case DIST_FLOAT64:
      *static_cast<double*>(b.data) += 1;
      break;
    default:
      break;
  }
}

void CorruptIfDone(dist_backend_work_t* work, dist_error_t* error, bool done) {
  if (error != nullptr || !done) return;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_recv.find(work);
  if (it == g_recv.end()) return;
  OffByOne(it->second);
  g_recv.erase(it);
}

dist_error_t* CorruptingWait(dist_backend_work_t* work, int64_t timeout_ms) {
  dist_error_t* error = kvstore_plugin_v1()->work_wait(work, timeout_ms);
  CorruptIfDone(work, error, error == nullptr);
  return error;
}

dist_error_t* CorruptingTest(dist_backend_work_t* work, int* done) {
  dist_error_t* error = kvstore_plugin_v1()->work_test(work, done);
  CorruptIfDone(work, error, *done != 0);
  return error;
}

void ForgettingDestroy(dist_backend_work_t* work) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_recv.erase(work);
  }
  kvstore_plugin_v1()->work_destroy(work);
}

}  // namespace

extern "C" DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static const dist_backend_plugin_t table = [] {
    dist_backend_plugin_t t = *kvstore_plugin_v1();
    t.name = "liar";
    if (Mode() == "caps") t.get_capabilities = LyingCapabilities;
    if (Mode() == "data") {
      t.all_reduce = CorruptingAllReduce;
      t.work_wait = CorruptingWait;
      t.work_test = CorruptingTest;
      t.work_destroy = ForgettingDestroy;
    }
    return t;
  }();
  return &table;
}
