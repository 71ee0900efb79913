// Checks for tests whose ranks are forked processes calling the public C
// API: a failed check prints the rank and what failed, and ends that rank
// at once with exit status 1 (the parent reports it). `rank` must be in
// scope.
#ifndef DIST_TESTS_GLOO_RANK_CHECKS_H_
#define DIST_TESTS_GLOO_RANK_CHECKS_H_

#include <cstdio>
#include <cstdlib>

#include "dist/dist.h"

#define CHECK_RANK(cond)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank, __FILE__, __LINE__, #cond); \
      std::_Exit(1);                                                                 \
    }                                                                                \
  } while (0)
#define OK_RANK(expr)                                                                        \
  do {                                                                                       \
    dist_error_t* e_ = (expr);                                                               \
    if (e_ != nullptr) {                                                                     \
      std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, #expr, dist_error_message(e_)); \
      std::_Exit(1);                                                                         \
    }                                                                                        \
  } while (0)

#endif  // DIST_TESTS_GLOO_RANK_CHECKS_H_
