// The shm communicator's task queue (plugins/backends/shm/fifo.h) against
// std::deque, over the patterns the communicator makes (fill one, drain it;
// a queue that never drains, so the consumed prefix is compacted) and a
// random mix.
#include "plugins/backends/shm/fifo.h"

#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace {

using dist_shm::Fifo;

// Element type that owns memory, as a task's shared_ptr does: a pop must
// release it, a compaction must move it.
using Item = std::shared_ptr<int>;

void ExpectSame(const Fifo<Item>& fifo, const std::deque<Item>& reference) {
  ASSERT_EQ(fifo.size(), reference.size());
  ASSERT_EQ(fifo.empty(), reference.empty());
  size_t i = 0;
  for (const Item& item : fifo) {
    ASSERT_NE(item, nullptr);
    EXPECT_EQ(*item, *reference[i++]);
  }
}

TEST(Fifo, FillOneDrainOneKeepsOrderAndReleases) {
  Fifo<Item> fifo;
  for (int i = 0; i < 100; ++i) {
    auto item = std::make_shared<int>(i);
    std::weak_ptr<int> watch = item;
    fifo.push_back(std::move(item));
    ASSERT_EQ(fifo.size(), 1u);
    EXPECT_EQ(*fifo.front(), i);
    fifo.pop_front();
    EXPECT_TRUE(fifo.empty());
    EXPECT_TRUE(watch.expired());  // the popped element let go of its value
  }
}

TEST(Fifo, PopReleasesTheValueWhileOthersAreQueued) {
  Fifo<Item> fifo;
  auto first = std::make_shared<int>(1);
  std::weak_ptr<int> watch = first;
  fifo.push_back(std::move(first));
  fifo.push_back(std::make_shared<int>(2));
  fifo.pop_front();
  EXPECT_TRUE(watch.expired());  // not held until the queue drains
  EXPECT_EQ(*fifo.front(), 2);
}

TEST(Fifo, NeverDrainingQueueCompactsAndKeepsOrder) {
  Fifo<Item> fifo;
  std::deque<Item> reference;
  int next = 0;
  // Two in, one out, for a long time: the queue never empties.
  for (int step = 0; step < 5000; ++step) {
    for (int k = 0; k < 2; ++k) {
      fifo.push_back(std::make_shared<int>(next));
      reference.push_back(std::make_shared<int>(next));
      ++next;
    }
    ASSERT_EQ(*fifo.front(), *reference.front());
    fifo.pop_front();
    reference.pop_front();
  }
  ExpectSame(fifo, reference);
}

TEST(Fifo, RandomPushesPopsAndClearsMatchADeque) {
  std::mt19937 random(12345);
  Fifo<Item> fifo;
  std::deque<Item> reference;
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    const int choice = static_cast<int>(random() % 100);
    if (choice < 55) {
      fifo.push_back(std::make_shared<int>(next));
      reference.push_back(std::make_shared<int>(next));
      ++next;
    } else if (choice < 99) {
      if (reference.empty()) continue;
      ASSERT_EQ(*fifo.front(), *reference.front());
      fifo.pop_front();
      reference.pop_front();
    } else {
      fifo.clear();
      reference.clear();
    }
    if (step % 97 == 0) ExpectSame(fifo, reference);
  }
  ExpectSame(fifo, reference);
}

}  // namespace
